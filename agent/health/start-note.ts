/**
 * The note the etcd container's start script leaves when it refused to start etcd (an etcd older
 * than its data directory, or one that skips a minor version: prepare/version-gate.ts), read for
 * `/v1/health/local` and this pod's member in `/v1/health`. The script empties the file whenever it
 * lets etcd start, so a note is current while the member is down; health shows it only then.
 */
import * as fs from 'node:fs';

/** A note is one line; anything longer is cut here, so a wrong file cannot flood an answer. */
const MAX_NOTE_CHARS = 300;

/** The note's first line in `file`, or undefined when the file is missing, empty or unreadable. */
export async function readStartNote(file: string): Promise<string | undefined> {
  let text: string;
  try {
    text = await fs.promises.readFile(file, 'utf8');
  } catch {
    return undefined;
  }
  const line = text.split('\n', 1)[0].trim();
  return line === '' ? undefined : line.slice(0, MAX_NOTE_CHARS);
}
