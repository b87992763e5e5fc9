import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DirStore } from '../../agent/backup/dir-store';
import { manifestBytes, manifestKey, readBackups, snapshotKey } from '../../agent/backup/layout';
import type { Manifest } from '../../agent/proto/backup';

const A = '20261204T230000.123Z-1a2b3c';
const B = '20261205T010000.000Z-00ff00';
const C = '20261205T020000.000Z-abcdef';

const SNAPSHOT = Buffer.alloc(64, 's');

function manifestOf(name: string): Manifest {
  return {
    format: 1,
    name,
    clusterId: 'cdf818194e3a8c32',
    revision: 42,
    etcdVersion: '3.6.16',
    member: { id: '8e9e05c52164694d', name: 'etcd-0', clientURL: 'http://127.0.0.1:2379' },
    agent: 'etcd-0',
    sizeBytes: SNAPSHOT.length,
    sha256: 'a'.repeat(64),
    startedAt: '2026-12-04T23:00:00.123Z',
    finishedAt: '2026-12-04T23:00:01.000Z',
    durationMs: 877,
  };
}

/** Another agent's retention, as it removes a backup: the manifest first, then the snapshot. */
function removeBackup(root: string, name: string): void {
  fs.rmSync(path.join(root, manifestKey(name)), { force: true });
  fs.rmSync(path.join(root, snapshotKey(name)), { force: true });
  fs.rmdirSync(path.join(root, name));
}

describe('DirStore while another agent removes backups', () => {
  let root: string;
  let store: DirStore;
  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'dir-store-'));
    store = new DirStore(root);
    for (const name of [A, B, C]) {
      fs.mkdirSync(path.join(root, name));
      fs.writeFileSync(path.join(root, snapshotKey(name)), SNAPSHOT);
      fs.writeFileSync(path.join(root, manifestKey(name)), manifestBytes(manifestOf(name)));
    }
  });
  afterEach(() => {
    jest.restoreAllMocks();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('when a backup is removed between reading its folder and its files, then the listing leaves it out and does not fail', async () => {
    const stat = fs.promises.stat.bind(fs.promises);
    const asked: string[] = [];
    jest.spyOn(fs.promises, 'stat').mockImplementation(async (file, options) => {
      const key = path.relative(root, String(file));
      asked.push(key);
      if (key.startsWith(`${A}/`) && fs.existsSync(path.join(root, A))) removeBackup(root, A);
      return stat(file, options);
    });
    const keys = (await store.list('')).map((o) => o.key);
    // The removal happened inside the walk: A's files were asked for after its folder was read.
    expect(asked.filter((k) => k.startsWith(`${A}/`)).sort()).toEqual([manifestKey(A), snapshotKey(A)]);
    expect(keys).toEqual([manifestKey(B), snapshotKey(B), manifestKey(C), snapshotKey(C)]);
  });

  it('when a backup is removed between the listing and the reading of its manifest, then it is not a backup and not a broken one', async () => {
    const list = store.list.bind(store);
    jest.spyOn(store, 'list').mockImplementation(async (prefix) => {
      const listed = await list(prefix);
      removeBackup(root, B);
      return listed;
    });
    const found = await readBackups(store);
    expect(found.listing.paired.map((p) => p.name)).toEqual([A, B, C]);
    expect(found.entries.map((e) => e.name)).toEqual([A, C]);
    expect(found.broken).toEqual([]);
  });

  it('when a file cannot be read for another reason, then the listing fails as a StoreError naming it', async () => {
    jest.spyOn(fs.promises, 'stat').mockImplementation(async (file) => {
      if (String(file).endsWith(snapshotKey(C))) throw Object.assign(new Error('permission denied'), { code: 'EACCES' });
      return fs.statSync(file);
    });
    await expect(store.list('')).rejects.toMatchObject({ failure: 'credentials', message: expect.stringContaining(snapshotKey(C)) });
  });
});

describe('DirStore: what abortUnfinished removes', () => {
  let root: string;
  let store: DirStore;
  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'dir-store-'));
    store = new DirStore(root);
    fs.mkdirSync(path.join(root, A));
  });
  afterEach(() => {
    jest.restoreAllMocks();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("when another agent's run aborts unfinished uploads while a manifest is being written, then the manifest is written whole", async () => {
    const writeFile = fs.promises.writeFile.bind(fs.promises);
    const aborted: string[][] = [];
    jest.spyOn(fs.promises, 'writeFile').mockImplementation(async (file, data, options) => {
      await writeFile(file, data, options);
      // The other run starts now, under the cluster lock that this put (a verification's) is outside of.
      aborted.push(await new DirStore(root).abortUnfinished('', new Date(Date.now() + 1000)));
    });

    await store.put(manifestKey(A), manifestBytes(manifestOf(A)));

    expect(aborted).toEqual([[]]);
    expect(JSON.parse(fs.readFileSync(path.join(root, manifestKey(A)), 'utf8'))).toEqual(manifestOf(A));
    expect(fs.readdirSync(path.join(root, A))).toEqual(['manifest.json']);
  });

  it.each<[string, boolean, string, number]>([
    ["a killed run's upload, begun before the cut-off", true, `${snapshotKey(A)}.partial-12-1`, 1_000],
    ['an upload begun after the cut-off', false, `${snapshotKey(A)}.partial-12-2`, -1_000],
    ["a killed put's file, older than an hour", true, `${manifestKey(A)}.writing-12-3`, 3_601_000],
    ['a put begun before the cut-off but within the hour (a verification writing now)', false, `${manifestKey(A)}.writing-12-4`, 1_000],
  ])('when the store holds %s, then abortUnfinished removes it: %s', async (_what, removed, key, ageMs) => {
    const cutOff = new Date();
    const file = path.join(root, key);
    fs.writeFileSync(file, 'part');
    const at = new Date(cutOff.getTime() - ageMs);
    fs.utimesSync(file, at, at);

    const aborted = await store.abortUnfinished('', cutOff);

    expect(aborted).toEqual(removed ? [key.replace(/\.(partial|writing)-.*$/, '')] : []);
    expect(fs.existsSync(file)).toBe(!removed);
    expect(await store.list('')).toEqual([]);
  });
});
