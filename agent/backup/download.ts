/**
 * A snapshot object fetched into a local file, hashed on the way and fsynced, so a restore or a
 * verification reads what the store holds and can compare it with the manifest's size and sha256.
 * A failure of the store's stream part way is a StoreError like any other store failure; a failure
 * to write the local file (no room, no write access, a read-only file system) is a LocalFileError:
 * this machine's, never the store's, and not retryable.
 *
 * Rule: the file is fdatasynced each time another SYNC_EVERY bytes are in it. Its page cache is
 * charged to the sidecar's memory limit; pages not yet written out cannot be reclaimed without
 * waiting for the disk, so a copy of a large snapshot left dirty would stall the agent's own
 * allocations (and its health answers) at the limit. Clean pages are reclaimed at once.
 */
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AgentError } from '../proto/errors';
import { StoreError, type BackupStore } from './store';

/** The local copy could not be written (ENOSPC, EACCES, EROFS, …): `errno` says why. Not retryable. */
export class LocalFileError extends AgentError {
  readonly errno: string;

  constructor(
    readonly file: string,
    cause: unknown,
  ) {
    const errno = (cause as NodeJS.ErrnoException).code ?? 'EIO';
    super('unavailable', `writing ${file} on this machine failed: ${(cause as Error).message}`, {
      retryable: false,
      details: { local: errno },
      cause,
    });
    this.errno = errno;
  }
}

/** How many bytes are written between two fdatasyncs of the local copy (see the module comment). */
export const SYNC_EVERY = 16 * 1024 * 1024;

/** How a download runs: the call's signal, and who hears of each chunk once it is in the file. */
export interface DownloadOptions {
  signal?: AbortSignal;
  /** Told the bytes in the file so far, after each chunk's write returned. */
  onWritten?: (bytes: number) => void;
}

/** Streams `key` into `file` (mode 0600, fsynced) and answers its sha256 and size. */
export async function downloadHashed(
  store: BackupStore,
  key: string,
  file: string,
  { signal, onWritten }: DownloadOptions = {},
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
  const handle = await fsp.open(file, 'w', 0o600).catch((err: unknown) => {
    throw new LocalFileError(file, err);
  });
  let written = 0;
  let synced = 0;
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const wrote = async (): Promise<void> => {
        await handle.write(chunk);
        written += chunk.length;
        if (written - synced >= SYNC_EVERY) {
          await handle.datasync();
          synced = written;
        }
      };
      wrote().then(
        () => {
          onWritten?.(written);
          done();
        },
        (err: unknown) => done(new LocalFileError(file, err)),
      );
    },
  });
  try {
    await pipeline(await store.download(key, signal), tap, sink, signal === undefined ? {} : { signal });
    await handle.sync().catch((err: unknown) => {
      throw new LocalFileError(file, err);
    });
  } catch (err) {
    if (err instanceof StoreError || err instanceof LocalFileError) throw err;
    if (signal?.aborted === true) throw new StoreError('timeout', `${store.description}: reading ${key}: the call's deadline passed`, err);
    throw new StoreError('failed', `${store.description}: reading ${key}: ${(err as Error).message}`, err);
  } finally {
    await handle.close();
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
