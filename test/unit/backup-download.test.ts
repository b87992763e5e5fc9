import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { downloadHashed, LocalFileError, SYNC_EVERY } from '../../agent/backup/download';
import { StoreError, type BackupStore } from '../../agent/backup/store';

/** A store whose one object streams `chunks`, then fails with `error` when one is given. */
function storeOf(chunks: Buffer[], error?: Error): BackupStore {
  return {
    description: 'test store',
    download: async () =>
      Readable.from(
        (async function* () {
          yield* chunks;
          if (error !== undefined) throw error;
        })(),
      ),
  } as unknown as BackupStore;
}

const MiB = Buffer.alloc(1024 * 1024, 'x');

describe('downloadHashed', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'download-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('when the object streams whole, then the file holds it and its sha256 and size are answered', async () => {
    const file = path.join(dir, 'snapshot.db');
    const got = await downloadHashed(storeOf([MiB, MiB]), 'x/snapshot.db', file);
    expect(got.size).toBe(2 * MiB.length);
    expect(fs.statSync(file).size).toBe(2 * MiB.length);
  });

  it('when a large object streams in, then the file is fdatasynced each time another 16 MiB are in it', async () => {
    const file = path.join(dir, 'snapshot.db');
    // Every FileHandle shares one prototype; the sizes the file had when each sync was asked.
    const probe = await fs.promises.open(path.join(dir, 'probe'), 'w');
    const proto = Object.getPrototypeOf(probe) as { datasync: () => Promise<void>; sync: () => Promise<void> };
    await probe.close();
    const synced: string[] = [];
    const datasync = jest.spyOn(proto, 'datasync').mockImplementation(async function (this: fs.promises.FileHandle) {
      synced.push(`datasync at ${fs.statSync(file).size / MiB.length} MiB`);
      return this.sync();
    });
    const chunks = Array.from({ length: 40 }, () => MiB);
    try {
      await downloadHashed(storeOf(chunks), 'x/snapshot.db', file);
    } finally {
      datasync.mockRestore();
    }
    expect(SYNC_EVERY).toBe(16 * MiB.length);
    expect(synced).toEqual(['datasync at 16 MiB', 'datasync at 32 MiB']);
    expect(fs.statSync(file).size).toBe(40 * MiB.length);
  });

  it.each<[string, () => string, string]>([
    // Linux's /dev/full answers every write with ENOSPC: a volume that is full.
    ['the local disk is full', () => '/dev/full', 'ENOSPC'],
    ['the local directory is missing', () => path.join(dir, 'gone', 'snapshot.db'), 'ENOENT'],
    ['the local path is a directory', () => dir, 'EISDIR'],
  ])("when %s, then the error is this machine's (LocalFileError, not retryable), not the store's", async (_case, file, errno) => {
    const thrown = await downloadHashed(storeOf([MiB, MiB, MiB]), 'x/snapshot.db', file()).catch((err: unknown) => err);
    expect(thrown).toBeInstanceOf(LocalFileError);
    expect(thrown).not.toBeInstanceOf(StoreError);
    expect({ errno: (thrown as LocalFileError).errno, retryable: (thrown as LocalFileError).retryable }).toEqual({
      errno,
      retryable: false,
    });
    expect((thrown as LocalFileError).message).toContain('on this machine');
  });

  it("when the store's stream breaks part way, then it is the store's failure (a retryable StoreError)", async () => {
    const thrown = await downloadHashed(storeOf([MiB], new Error('socket hang up')), 'x/snapshot.db', path.join(dir, 's.db')).catch(
      (err: unknown) => err,
    );
    expect(thrown).toBeInstanceOf(StoreError);
    expect({ failure: (thrown as StoreError).failure, retryable: (thrown as StoreError).retryable }).toEqual({
      failure: 'failed',
      retryable: true,
    });
  });
});
