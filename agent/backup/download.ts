/**
 * A snapshot object fetched into a local file, hashed on the way and fsynced, so a restore or a
 * verification reads what the store holds and can compare it with the manifest's size and sha256.
 * A failure of the store's stream part way is a StoreError like any other store failure.
 */
import { createHash } from 'node:crypto';
import { createWriteStream, promises as fsp } from 'node:fs';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { StoreError, type BackupStore } from './store';

/** Streams `key` into `file` (mode 0600, fsynced) and answers its sha256 and size. */
export async function downloadHashed(
  store: BackupStore,
  key: string,
  file: string,
  signal?: AbortSignal,
): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  const tap = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  try {
    await pipeline(
      await store.download(key, signal),
      tap,
      createWriteStream(file, { mode: 0o600 }),
      signal === undefined ? {} : { signal },
    );
    await syncPath(file);
  } catch (err) {
    if (err instanceof StoreError) throw err;
    if (signal?.aborted === true) throw new StoreError('timeout', `${store.description}: reading ${key}: the call's deadline passed`, err);
    throw new StoreError('failed', `${store.description}: reading ${key}: ${(err as Error).message}`, err);
  }
  return { sha256: hash.digest('hex'), size };
}

/** fsyncs a file or a directory (a rename is durable once its directory is). */
export async function syncPath(target: string): Promise<void> {
  const handle = await fsp.open(target, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
