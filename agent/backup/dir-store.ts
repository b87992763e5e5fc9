/**
 * A backup store in a local directory (a PVC, a mounted volume). An upload streams into
 * `<key>.partial-<pid>-<n>` and is renamed onto its key once whole and fsynced, so a killed upload
 * leaves only a `.partial-` file, which is never listed and which `abortUnfinished` removes.
 *
 * A put (a manifest) is written to `<key>.writing-<pid>-<n>` and renamed the same way. Puts also run
 * outside the cluster lock (a verification writes its record while another agent's run holds the
 * lock and aborts unfinished uploads), so a `.writing-` file is no unfinished upload:
 * `abortUnfinished` removes one only once it is older than `WRITING_GRACE_MS`, as a killed put's.
 */
import { createReadStream, createWriteStream, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { syncPath } from './download';
import { StoreError, type BackupStore, type StoredObject } from './store';

const PARTIAL = '.partial-';
const WRITING = '.writing-';
/** A put writes a few kilobytes: its file older than this is a killed put's, not one writing now. */
const WRITING_GRACE_MS = 3600_000;
let uploads = 0;

/** The store of one directory. */
export class DirStore implements BackupStore {
  readonly description: string;

  constructor(private readonly root: string) {
    this.description = `directory ${root}`;
  }

  async upload(key: string, body: Readable, signal?: AbortSignal): Promise<{ sizeBytes: number }> {
    const file = await this.fileFor(key, true);
    const partial = `${file}${PARTIAL}${process.pid}-${++uploads}`;
    try {
      await pipeline(body, createWriteStream(partial, { mode: 0o600 }), signal === undefined ? {} : { signal });
      await syncPath(partial);
      await fsp.rename(partial, file);
      await syncPath(path.dirname(file));
      return { sizeBytes: (await fsp.stat(file)).size };
    } catch (err) {
      await fsp.rm(partial, { force: true });
      // The caller's signal is its deadline: its end is a timeout, whatever the stream says.
      if (signal?.aborted === true) throw new StoreError('timeout', `${this.description}: writing ${key}: the call's deadline passed`, err);
      throw this.failure(err, `writing ${key}`);
    }
  }

  async put(key: string, body: Buffer): Promise<void> {
    const file = await this.fileFor(key, true);
    const partial = `${file}${WRITING}${process.pid}-${++uploads}`;
    try {
      await fsp.writeFile(partial, body, { mode: 0o600, flush: true });
      await fsp.rename(partial, file);
      await syncPath(path.dirname(file));
    } catch (err) {
      await fsp.rm(partial, { force: true });
      throw this.failure(err, `writing ${key}`);
    }
  }

  async download(key: string): Promise<Readable> {
    const file = await this.fileFor(key, false);
    try {
      await fsp.access(file);
    } catch (err) {
      throw this.failure(err, `reading ${key}`);
    }
    return createReadStream(file);
  }

  async read(key: string): Promise<Buffer | undefined> {
    const file = await this.fileFor(key, false);
    try {
      return await fsp.readFile(file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw this.failure(err, `reading ${key}`);
    }
  }

  async list(prefix: string): Promise<StoredObject[]> {
    await this.checkRoot();
    const found: StoredObject[] = [];
    await this.walk('', async (key, stat) => {
      if (key.startsWith(prefix) && unfinished(key) === undefined) found.push({ key, sizeBytes: stat.size, modifiedAt: stat.mtime });
    });
    return found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async remove(keys: string[]): Promise<void> {
    for (const key of keys) {
      const file = await this.fileFor(key, false);
      await fsp.rm(file, { force: true });
      // The backup's folder goes with its last object.
      await fsp.rmdir(path.dirname(file)).catch(() => undefined);
    }
  }

  async abortUnfinished(prefix: string, olderThan: Date): Promise<string[]> {
    await this.checkRoot();
    const aborted: string[] = [];
    const writingBefore = olderThan.getTime() - WRITING_GRACE_MS;
    await this.walk('', async (key, stat) => {
      const left = unfinished(key);
      if (left === undefined || !key.startsWith(prefix)) return;
      if (stat.mtime.getTime() >= (left.kind === 'upload' ? olderThan.getTime() : writingBefore)) return;
      await fsp.rm(path.join(this.root, key), { force: true });
      aborted.push(left.key);
    });
    return aborted;
  }

  close(): void {}

  private async checkRoot(): Promise<void> {
    try {
      if (!(await fsp.stat(this.root)).isDirectory()) throw new StoreError('no-bucket', `${this.description} is not a directory`);
    } catch (err) {
      throw this.failure(err, 'opening it');
    }
  }

  /** The file of `key`, never outside the root; with `create`, its folder is made. */
  private async fileFor(key: string, create: boolean): Promise<string> {
    const file = path.resolve(this.root, key);
    if (!file.startsWith(`${this.root}${path.sep}`)) throw new StoreError('failed', `the key ${key} is outside ${this.description}`);
    await this.checkRoot();
    if (create) await fsp.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    return file;
  }

  /**
   * Visits every file under `dir`. Another agent's retention may remove files while this walks (it
   * runs outside the cluster lock): a file or folder gone before it is read was not there, so it is
   * left out rather than failing the listing.
   */
  private async walk(dir: string, visit: (key: string, stat: import('node:fs').Stats) => Promise<void>): Promise<void> {
    const entries = await fsp.readdir(path.join(this.root, dir), { withFileTypes: true }).catch(() => []);
    for (const entry of entries) {
      const key = dir === '' ? entry.name : `${dir}/${entry.name}`;
      if (entry.isDirectory()) await this.walk(key, visit);
      else if (entry.isFile()) {
        const stat = await fsp.stat(path.join(this.root, key)).catch((err: NodeJS.ErrnoException) => {
          if (err.code === 'ENOENT') return undefined;
          throw this.failure(err, `listing ${key}`);
        });
        if (stat !== undefined) await visit(key, stat);
      }
    }
  }

  private failure(err: unknown, doing: string): StoreError {
    if (err instanceof StoreError) return err;
    const code = (err as NodeJS.ErrnoException).code;
    const message = `${this.description}: ${doing}: ${(err as Error).message}`;
    if (code === 'ENOENT') return new StoreError(doing === 'opening it' ? 'no-bucket' : 'not-found', message, err);
    if (code === 'EACCES' || code === 'EPERM') return new StoreError('credentials', message, err);
    return new StoreError('failed', message, err);
  }
}

/** The key an unfinished upload or put is for, and which it is; undefined for a whole object. */
function unfinished(key: string): { key: string; kind: 'upload' | 'put' } | undefined {
  for (const [marker, kind] of [
    [PARTIAL, 'upload'],
    [WRITING, 'put'],
  ] as const) {
    const at = key.indexOf(marker);
    if (at >= 0) return { key: key.slice(0, at), kind };
  }
  return undefined;
}
