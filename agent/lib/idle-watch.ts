/**
 * A watch on a stream that should be sending: while it flows (its reader is ready for more), a chunk
 * must come within `idleMs`. The time its reader holds it paused (backpressure from a slow consumer)
 * does not count, so a slow store never passes for a silent source. A peer frozen or cut off without
 * a reset sends neither bytes nor an error: this is what ends the wait for it.
 */
import type { Readable } from 'node:stream';

/** Calls `onIdle(silentMs)` once when `stream` flows for `idleMs` without a chunk; answers the function that stops the watch. */
export function watchIdle(stream: Readable, idleMs: number, onIdle: (silentMs: number) => void): () => void {
  let since = Date.now();
  const moved = (): void => {
    since = Date.now();
  };
  const timer = setInterval(
    () => {
      const silent = Date.now() - since;
      if (stream.readableFlowing !== true || silent < idleMs) return;
      stop();
      onIdle(silent);
    },
    Math.max(10, Math.min(1000, Math.floor(idleMs / 4))),
  );
  timer.unref();
  const stop = (): void => {
    clearInterval(timer);
    stream.off('data', moved);
    stream.off('resume', moved);
    stream.off('close', stop);
  };
  // Listened to once the stream is piped: a 'data' listener added earlier would start it flowing.
  stream.on('data', moved);
  stream.on('resume', moved);
  stream.on('close', stop);
  return stop;
}
