/**
 * A data directory a root etcd wrote, taken over by a non-root etcd as a pod's `fsGroup` makes the
 * kubelet do it (docs/deploy/statefulset.md, "From a root etcd to a non-root one"): one pod of a
 * StatefulSet (test/helpers/prepare-pods.ts) runs prepare and etcd as root and writes a key; then
 * its volume gets what the kubelet does to it for `fsGroup: 65532` under `OnRootMismatch` (the walk
 * below is kubelet's pkg/volume/volume_linux.go, 1.34), and prepare and etcd run as 65532:65532 on
 * the same data. Before the walk, and after a root etcd wrote a file again, prepare refuses with one
 * line naming the file. Needs root, as the kubelet does (chown, and another user's processes).
 */
import fs from 'node:fs';
import path from 'node:path';
import { eventually, patience } from '../helpers/eventually';
import { PodSet, RunAs } from '../helpers/prepare-pods';

jest.setTimeout(patience(120_000));

const NON_ROOT: RunAs = { uid: 65532, gid: 65532 };
const NAME = 'etcd-0';
const runsAsRoot = process.getuid?.() === 0;

/** The kubelet's `requiresPermissionChange`: whether `OnRootMismatch` walks the volume whose top is `root`. */
function requiresPermissionChange(root: string, fsGroup: number): boolean {
  const stat = fs.statSync(root);
  return stat.gid !== fsGroup || (stat.mode & 0o770) !== 0o770 || (stat.mode & 0o2000) === 0;
}

/** The kubelet's walk for `fsGroup` (read-write volume): each entry gets the group, group read-write, and each directory g+x and set-group-id. */
function applyFsGroup(root: string, fsGroup: number): void {
  const walk = (p: string): void => {
    const stat = fs.lstatSync(p);
    fs.lchownSync(p, -1, fsGroup);
    if (stat.isSymbolicLink()) return;
    fs.chmodSync(p, (stat.mode & 0o7777) | 0o660 | (stat.isDirectory() ? 0o2110 : 0));
    if (stat.isDirectory()) for (const name of fs.readdirSync(p)) walk(path.join(p, name));
  };
  walk(root);
}

(runsAsRoot ? describe : describe.skip)('a data directory a root etcd wrote, under a non-root etcd', () => {
  let pods: PodSet;
  let volume: string;
  let dataDir: string;
  let run: string;

  beforeAll(async () => {
    pods = await PodSet.create(1, 1);
    dataDir = pods.pod(NAME).dataDir;
    volume = path.dirname(dataDir);
    run = path.dirname(pods.pod(NAME).flagsFile);
  });

  afterAll(async () => {
    await pods?.destroy();
  });

  /** A fresh start directory, as the kubelet makes an emptyDir: mode 0777, empty. */
  function emptyDir(): void {
    fs.rmSync(run, { recursive: true, force: true });
    fs.mkdirSync(run, { recursive: true });
    fs.chmodSync(run, 0o777);
  }

  /** The one line prepare printed on stderr, when it exited 2. */
  async function refusal(): Promise<string> {
    emptyDir();
    const ran = await pods.prepare(NAME, { as: NON_ROOT, keepRun: true, waitSeconds: 10 });
    expect(ran.code).toBe(2);
    expect(ran.stderr.split('\n').filter(Boolean)).toHaveLength(1);
    return ran.stderr;
  }

  it('when a root etcd wrote the data and a key, then its files are root-owned, 0700 and 0600, and the volume is not group 65532 yet', async () => {
    await pods.prepareUntilReady(NAME, { waitSeconds: 30 });
    pods.startEtcd(NAME);
    await eventually(async () => expect(await pods.healthy(NAME)).toBe(true), { within: 30_000, every: 200 });
    await pods.etcdctl(['put', 'takeover/before', 'root wrote me'], [NAME]);
    await pods.stopEtcd(NAME);

    const wal = path.join(dataDir, 'member', 'wal');
    const walFile = fs.readdirSync(wal).find((f) => f.endsWith('.wal')) as string;
    expect([fs.statSync(dataDir).uid, fs.statSync(dataDir).mode & 0o7777]).toEqual([0, 0o700]);
    expect([fs.statSync(path.join(wal, walFile)).uid, fs.statSync(path.join(wal, walFile)).mode & 0o7777]).toEqual([0, 0o600]);
    expect(requiresPermissionChange(volume, NON_ROOT.gid)).toBe(true);
  });

  it('when prepare runs as 65532 before the kubelet has given the volume its group, then it exits 2 with one line naming the data directory and fsGroup', async () => {
    const line = await refusal();

    expect(line).toMatch(/^etcd-lifecycle-agent prepare: invalid configuration: ETCD_AGENT_DATA_DIR: /);
    expect(line).toContain('permission denied');
    expect(line).toContain('fsGroup');
  });

  it('when the kubelet has applied fsGroup 65532 (OnRootMismatch walks it), then prepare as 65532 decides an existing start and etcd as 65532 serves the old key and takes writes, warning only about its directories mode', async () => {
    applyFsGroup(volume, NON_ROOT.gid);
    expect(requiresPermissionChange(volume, NON_ROOT.gid)).toBe(false);
    // The files stay root's, with the group's read and write.
    expect([fs.statSync(dataDir).uid, fs.statSync(dataDir).gid, fs.statSync(dataDir).mode & 0o7777]).toEqual([0, NON_ROOT.gid, 0o2770]);

    emptyDir();
    const ran = await pods.prepare(NAME, { as: NON_ROOT, keepRun: true, waitSeconds: 30 });
    expect({ code: ran.code, stderr: ran.stderr }).toEqual({ code: 0, stderr: '' });
    expect(ran.lines.find((l) => l.message === 'prepared')).toMatchObject({ state: 'existing' });
    // What prepare wrote in the start directory is its user's.
    expect(fs.statSync(path.join(run, 'etcd-start')).uid).toBe(NON_ROOT.uid);

    const from = pods.etcdLog(NAME).length;
    pods.startEtcd(NAME, { as: NON_ROOT });
    await eventually(async () => expect(await pods.healthy(NAME)).toBe(true), { within: 30_000, every: 200 });
    expect(await pods.etcdctl(['get', 'takeover/before', '--print-value-only'], [NAME])).toBe('root wrote me\n');
    await pods.etcdctl(['put', 'takeover/after', 'as 65532'], [NAME]);
    expect(await pods.etcdctl(['get', 'takeover/after', '--print-value-only'], [NAME])).toBe('as 65532\n');
    const log = pods.etcdLog(NAME).slice(from);
    expect(log).toContain('check file permission');
    expect(log).not.toMatch(/permission denied/i);
    // etcd runs as 65532: what it writes now is its own.
    const pid = pods.etcdPid(NAME) as number;
    expect(fs.statSync(`/proc/${pid}`).uid).toBe(NON_ROOT.uid);
    await pods.stopEtcd(NAME);
  });

  it('when a root etcd wrote a file again after the walk (OnRootMismatch then skips the volume), then prepare as 65532 exits 2 naming that file, its owner and mode', async () => {
    const wal = path.join(dataDir, 'member', 'wal');
    const walFile = path.join(wal, fs.readdirSync(wal).filter((f) => f.endsWith('.wal'))[0]);
    fs.chownSync(walFile, 0, NON_ROOT.gid);
    fs.chmodSync(walFile, 0o600);
    expect(requiresPermissionChange(volume, NON_ROOT.gid)).toBe(false);

    const line = await refusal();

    expect(line).toContain(
      `ETCD_AGENT_DATA_DIR: ${walFile} cannot be read and written by uid 65532 gid 65532 (it is uid 0 gid 65532 mode 0600)`,
    );
    expect(line).toContain('fsGroupChangePolicy');
  });
});
