/**
 * A writable stream that keeps everything written to it as one string, for
 * tests that give an agent's logger a stream and then look into its logs.
 */
import { Writable } from 'node:stream';

/** A stream to hand to `createLogger`, and what has been written to it so far. */
export function captureLogs(): { stream: Writable; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk, _encoding, done) {
      text += String(chunk);
      done();
    },
  });
  return { stream, text: () => text };
}
