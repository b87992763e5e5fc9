/**
 * A restore from a backup by `prepare`, against real etcd processes standing in for a StatefulSet's
 * pods (test/helpers/prepare-pods.ts): a 3-member cluster takes writes, a backup is made of it, every
 * member's data is wiped, and the three pods' prepare run with the restore asked. Exactly one pod
 * (the initial member whose name sorts first) restores; the others wait, then join it learner-first; every write
 * acknowledged at or before the backup's revision is there. Then what must not restore: one member
 * still holding data, a cluster that answers, a pod not asked beside one asked, a corrupted object,
 * another cluster's backup (unless forced); and a restore killed after each of its steps, run again.
 * The store is a real S3 server (versitygw) on every etcd version (3.4 restores with etcdctl).
 */
import { GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { manifestBytes, manifestKey, newBackupName, snapshotKey } from '../../agent/backup/layout';
import { restoreWorkDir } from '../../agent/backup/restore';
import { etcd3 } from '../../agent/etcd/etcd3-module';
import { EtcdCluster } from '../../agent/etcd/cluster-client';
import { HttpClient } from '../../scripts/bench/http';
import { readDataDir } from '../../agent/etcd-data/data-dir';
import { Deadline } from '../../agent/lib/deadline';
import type { BackupResult, Manifest } from '../../agent/proto/backup';
import { lostWrites, restoreToolPath, Writer, type AckedPut } from '../helpers/backup-check';
import { eventually, patience } from '../helpers/eventually';
import type { LogLine } from '../helpers/child-agent';
import { call } from '../helpers/http-call';
import { PodSet, PrepareRun } from '../helpers/prepare-pods';
import { startS3Server, type S3Server } from '../helpers/s3-server';
import { itOnFirstVersion } from '../helpers/version-scope';

jest.setTimeout(patience(240_000));

const INITIAL = ['etcd-0', 'etcd-1', 'etcd-2'];
/** The prefix of the test's store in its bucket (s3-server.ts). */
const PREFIX = 'cluster-a';

let pods: PodSet;
let client: EtcdCluster;
let s3: S3Server;
let admin: S3Client;
let good: Manifest;
/** Every put the writer had acknowledged, with the revision etcd answered. */
let acked: AckedPut[] = [];

beforeAll(async () => {
  pods = await PodSet.create(3, 3);
  client = new EtcdCluster({ endpoints: pods.endpoints() });
  s3 = await startS3Server();
  admin = s3.client();
}, patience(120_000));

afterAll(async () => {
  client?.close();
  await pods?.destroy();
  await s3?.close();
});

/** prepare's variables that ask for a restore from the test's S3 store (the SDK reads the credentials from the environment). */
function restoreEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { ...s3.env, ETCD_AGENT_RESTORE_FROM: s3.location, ETCD_AGENT_ETCDUTL: restoreToolPath(), ...extra };
}

/** The restore of the first case's backup by name (newer ones in the store are another cluster's or damaged). */
function theGood(): Record<string, string> {
  return { ETCD_AGENT_RESTORE_BACKUP: good.name };
}

/** An object of the store, by its key under the store's prefix. */
async function getObject(key: string): Promise<Buffer> {
  const answer = await admin.send(new GetObjectCommand({ Bucket: s3.bucket, Key: `${PREFIX}/${key}` }));
  return Buffer.from(await (answer.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
}

/** Writes an object of the store, as another writer of the bucket would. */
async function putObject(key: string, body: Buffer): Promise<void> {
  await admin.send(new PutObjectCommand({ Bucket: s3.bucket, Key: `${PREFIX}/${key}`, Body: body, ContentLength: body.length }));
}

const stepsOf = (runs: PrepareRun[]): unknown[] =>
  runs.flatMap((r) => r.lines.filter((l) => l.message === 'prepare step').map((l) => l.step));
const linesOf = (runs: PrepareRun[], message: string): LogLine[] => runs.flatMap((r) => r.lines.filter((l) => l.message === message));
const decided = (runs: PrepareRun[]): LogLine | undefined => linesOf(runs, 'prepared').at(-1);

const runsAsRoot = process.getuid?.() === 0;
/** Cases that mount a file system (a volume too small, a data directory that is a mount point): root only. */
const asRoot = runsAsRoot ? itOnFirstVersion : (name: string, fn: () => Promise<void>): void => it.skip(name, fn);
const run = promisify(execFile);

/** Mounts a tmpfs of `size` at `dir` (made when missing) for the length of `fn`. */
async function withTmpfs<T>(dir: string, size: string, fn: () => Promise<T>): Promise<T> {
  fs.mkdirSync(dir, { recursive: true });
  await run('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0755`, 'tmpfs', dir]);
  try {
    return await fn();
  } finally {
    await run('umount', [dir]);
  }
}

async function startPod(name: string): Promise<void> {
  pods.startEtcd(name);
  await eventually(async () => expect(await pods.healthy(name)).toBe(true), { within: 30_000, every: 100 });
  await pods.startAgent(name);
}

async function stopAll(): Promise<void> {
  for (const name of INITIAL) await pods.stopAgent(name);
  await Promise.all(INITIAL.map((n) => pods.stopEtcd(n, true)));
}

function wipe(name: string): void {
  fs.rmSync(pods.pod(name).dataDir, { recursive: true, force: true });
}

/** Waits until the cluster has exactly `names` as started voters and no learner. */
async function votersAre(names: string[]): Promise<void> {
  await eventually(
    async () => {
      const list = await client.listMembers(Deadline.in(3000));
      expect(list.members.map((m) => `${m.name}${m.isLearner ? ' (learner)' : ''}`).sort()).toEqual([...names].sort());
    },
    { within: 60_000, every: 200 },
  );
}

/** Every write acknowledged at or before `revision` reads back, with its value. */
async function expectAckedUpTo(revision: number): Promise<void> {
  expect(acked.filter((a) => a.revision <= revision).length).toBeGreaterThan(20);
  const etcd = new (etcd3().Etcd3)({ hosts: pods.endpoints() });
  try {
    const read = await etcd.getAll().prefix('w/').strings();
    expect(lostWrites(acked, revision, new Map(Object.entries(read)))).toEqual([]);
  } finally {
    etcd.close();
  }
}

/** A backup taken by pod `name`'s sidecar process (POST /v1/backups), verified right after. */
async function backUp(name: string): Promise<Manifest> {
  const pod = pods.pod(name);
  const answer = await call(pod.agentProcess?.url ?? '', {
    method: 'POST',
    path: '/v1/backups',
    body: {},
    localAddress: pod.host,
    timeoutMs: 120_000,
  });
  expect(answer.status).toBe(200);
  const result = answer.json as BackupResult;
  expect(result).toMatchObject({ outcome: 'created', verification: { ok: true } });
  return { ...(result.manifest as Manifest), verification: result.verification };
}

/** Runs prepare for pod `name` until it exits 0, then starts its etcd and sidecar; answers every run. */
async function prepareAndStart(name: string, env: Record<string, string>): Promise<PrepareRun[]> {
  const runs = await pods.prepareUntilReady(name, { env, waitSeconds: 90, attempts: 2 });
  await startPod(name);
  return runs;
}

describe('restore from a backup', () => {
  it('when every member lost its data and the restore is asked on every pod, then the initial member whose name sorts first restores, the others join it as learners, and every write the backup holds is there', async () => {
    await pods.startAll(INITIAL, { ...s3.env, ETCD_AGENT_BACKUP_STORE: s3.location, ETCD_AGENT_ETCDUTL: restoreToolPath() });
    // A few megabytes beside the writer's keys, so the snapshot streams in many chunks (a kill can land mid-download).
    const http = new HttpClient(pods.endpoints()[0]);
    try {
      for (let i = 0; i < 8; i++) {
        const put = await http.post('/v3/kv/put', {
          key: Buffer.from(`big/${i}`).toString('base64'),
          value: randomBytes(512 * 1024).toString('base64'),
        });
        expect(put.status).toBe(200);
      }
    } finally {
      http.close();
    }
    const writer = new Writer(pods.endpoints()).start();
    await writer.acknowledged(50);
    good = await backUp('etcd-0');
    // Writes go on after the snapshot: those the backup cannot hold may or may not be there.
    await writer.acknowledged(writer.acked.length + 20);
    acked = await writer.stop();
    expect(acked.some((a) => a.revision > good.revision)).toBe(true);
    await stopAll();
    INITIAL.forEach(wipe);

    const runs = await Promise.all(INITIAL.map((n) => prepareAndStart(n, restoreEnv())));
    await votersAre(INITIAL);

    const byPod = Object.fromEntries(INITIAL.map((n, i) => [n, runs[i]]));
    expect(INITIAL.filter((n) => stepsOf(byPod[n]).includes('restore'))).toEqual(['etcd-0']);
    expect(stepsOf(byPod['etcd-0'])).toEqual(['restore']);
    expect(linesOf(byPod['etcd-0'], 'restore: done')).toHaveLength(1);
    expect(decided(byPod['etcd-0'])).toMatchObject({ state: 'existing', reason: expect.stringContaining('start as is') });
    for (const name of ['etcd-1', 'etcd-2']) {
      const lines = byPod[name].flatMap((r) => r.lines);
      const waited = lines.findIndex(
        (l) => l.message === 'waiting' && String(l.reason).includes('etcd-0, the initial member whose name sorts first, restores'),
      );
      const joined = lines.findIndex((l) => l.message === 'prepare step' && l.step === 'join');
      expect(waited).toBeGreaterThanOrEqual(0);
      expect(joined).toBeGreaterThan(waited);
      expect(linesOf(byPod[name], 'joined').filter((l) => l.outcome === 'added')).toEqual([expect.objectContaining({ isLearner: true })]);
      expect(decided(byPod[name])).toMatchObject({ state: 'existing' });
    }
    // One cluster, a new one: the restore made its own member and cluster ids.
    const ids = await pods.clusterIds(INITIAL);
    expect(new Set(Object.values(ids)).size).toBe(1);
    expect(ids['etcd-0']).not.toBe(good.clusterId);
    expect(fs.existsSync(restoreWorkDir(pods.pod('etcd-0').dataDir))).toBe(false);
    await expectAckedUpTo(good.revision);
  });

  // etcd's own answers decide this one (the member list through a quorum, the removal and the
  // learner's join), so it runs on every version.
  it('when the restore is asked while the cluster answers, then a pod that lost its data joins it and nothing is restored', async () => {
    await pods.stopAgent('etcd-0');
    await pods.stopEtcd('etcd-0', true);
    wipe('etcd-0');
    const runs = await prepareAndStart('etcd-0', restoreEnv());
    expect(stepsOf(runs)).toEqual(expect.arrayContaining(['replace', 'join']));
    expect(stepsOf(runs)).not.toContain('restore');
    expect(linesOf(runs, 'restore: chose a backup')).toEqual([]);
    await votersAre(INITIAL);
    await expectAckedUpTo(good.revision);
  });

  // No etcd runs here: the peers' prepare answers decide, the agent's own logic, alike on every version.
  itOnFirstVersion(
    'when the restore is asked but one member still holds its data, then nobody restores: each pod waits and says why',
    async () => {
      await stopAll();
      wipe('etcd-0');
      wipe('etcd-1');
      // etcd-1 waits longer than etcd-0, so that etcd-0 hears it the whole time.
      const runs = await Promise.all(
        ['etcd-0', 'etcd-1'].map((n, i) => pods.prepare(n, { env: restoreEnv(), waitSeconds: i === 0 ? 4 : 8 })),
      );
      for (const r of runs) {
        expect(r.code).toBe(1);
        expect(stepsOf([r])).not.toContain('restore');
      }
      expect(String(runs[0].lines.find((l) => l.level === 'error')?.reason)).toMatch(
        /not every initial member reports an empty data directory: etcd-2 \(no prepare answers at [^)]*\); a backup is restored only when every member's data is gone$/,
      );
      expect(String(runs[1].lines.find((l) => l.level === 'error')?.reason)).toContain(
        'etcd-0, the initial member whose name sorts first, restores',
      );
      for (const name of ['etcd-0', 'etcd-1']) {
        expect(readDataDir(pods.pod(name).dataDir)).toEqual({ kind: 'empty' });
        expect(fs.existsSync(restoreWorkDir(pods.pod(name).dataDir))).toBe(false);
      }
    },
  );

  // SIGKILLing prepare at each of its steps exercises the agent's own steps, alike on every version.
  itOnFirstVersion(
    'when each pod is killed at each step of the restore (the restorer at every one of its steps, each joiner as it joins and once its flags are written), then each next run goes on from there and the cluster comes back whole',
    async () => {
      await stopAll();
      INITIAL.forEach(wipe);
      const dataDir = pods.pod('etcd-0').dataDir;
      const work = restoreWorkDir(dataDir);
      // The joiners are killed too, each at its own step once the restored member answers; the
      // kubelet then runs their init containers again. Meanwhile they answer "waiting for this restore".
      const joiners = Promise.all(
        (
          [
            ['etcd-1', 'prepare-joined'],
            ['etcd-2', 'prepare-flags-written'],
          ] as const
        ).map(async ([name, crashAt]) => {
          const killed = await pods.prepare(name, { env: restoreEnv(), crashAt, waitSeconds: 300 });
          const after = await prepareAndStart(name, restoreEnv());
          return { name, killed, after };
        }),
      );
      const restorer = async (crashAt: string): Promise<PrepareRun> => {
        const run = await pods.prepare('etcd-0', { env: restoreEnv(), crashAt, waitSeconds: 60 });
        expect({ crashAt, signal: run.signal }).toEqual({ crashAt, signal: 'SIGKILL' });
        return run;
      };
      const size = (file: string): number => fs.statSync(file).size;

      const downloading = await restorer('restore-downloading');
      expect(fs.readdirSync(work)).toEqual(['snapshot.db']);
      expect(size(path.join(work, 'snapshot.db'))).toBeGreaterThan(0);
      expect(size(path.join(work, 'snapshot.db'))).toBeLessThan(good.sizeBytes);
      expect(readDataDir(dataDir)).toEqual({ kind: 'empty' });

      const downloaded = await restorer('restore-downloaded');
      expect(fs.readdirSync(work)).toEqual(['snapshot.db']);
      expect(size(path.join(work, 'snapshot.db'))).toBe(good.sizeBytes);
      expect(readDataDir(dataDir)).toEqual({ kind: 'empty' });

      // Killed with the tool, as a container's processes die together: its output is whatever it had written.
      const toolRunning = await restorer('restore-tool-running');
      expect(fs.readdirSync(work).sort()).toEqual(['data', 'snapshot.db']);
      expect(readDataDir(dataDir)).toEqual({ kind: 'empty' });

      const toolDone = await restorer('restore-tool-done');
      expect(readDataDir(path.join(work, 'data'))).toMatchObject({ kind: 'member' });
      expect(readDataDir(dataDir)).toEqual({ kind: 'empty' });

      const placing = await restorer('restore-placing');
      expect(readDataDir(path.join(work, 'data'))).toMatchObject({ kind: 'member' });
      expect(readDataDir(dataDir)).toEqual({ kind: 'empty' });

      const renamed = await restorer('restore-renamed');
      const restored = readDataDir(dataDir);
      expect(restored).toMatchObject({ kind: 'member' });

      // The start flags written on the restored member, etcd not started yet.
      const flagsWritten = await restorer('prepare-flags-written');
      expect(fs.existsSync(work)).toBe(false);
      expect(readDataDir(dataDir)).toEqual(restored);
      expect(fs.readFileSync(pods.pod('etcd-0').flagsFile, 'utf8')).toContain('--initial-cluster-state=existing');

      const last = await pods.prepare('etcd-0', { env: restoreEnv(), waitSeconds: 60 });
      expect(last.code).toBe(0);
      expect(stepsOf([last])).toEqual([]);
      expect(decided([last])).toMatchObject({ state: 'existing', reason: expect.stringContaining('start as is') });
      expect(readDataDir(dataDir)).toEqual(restored);

      // Every run up to the rename restored from scratch, after removing what the one before had left.
      const restoring = [downloading, downloaded, toolRunning, toolDone, placing, renamed];
      expect(stepsOf(restoring)).toEqual(restoring.map(() => 'restore'));
      expect(stepsOf([flagsWritten])).toEqual([]);
      const afterAKill = [downloaded, toolRunning, toolDone, placing, renamed, flagsWritten];
      expect(afterAKill.map((r) => linesOf([r], 'restore: removed what an unfinished restore left').length)).toEqual(
        afterAKill.map(() => 1),
      );

      await startPod('etcd-0');
      for (const { name, killed, after } of await joiners) {
        expect({ name, signal: killed.signal }).toEqual({ name, signal: 'SIGKILL' });
        for (const r of [killed, ...after]) expect(stepsOf([r])).not.toContain('restore');
        // One member each: the run after the kill finds it (as a learner not started yet), adds none.
        const added = [killed, ...after].flatMap((r) => r.lines.filter((l) => l.message === 'joined' && l.outcome === 'added'));
        expect({ name, added: added.length }).toEqual({ name, added: 1 });
      }
      await votersAre(INITIAL);
      const ids = await pods.clusterIds(INITIAL);
      expect(new Set(Object.values(ids)).size).toBe(1);
      await expectAckedUpTo(good.revision);
    },
  );

  // The sum is the agent's check, before etcd's tool sees the file: alike on every version.
  itOnFirstVersion(
    'when the newest backup is corrupted in the store, then the restore fails on its sha256 with the data directory untouched, a pod not asked to restore waits rather than bootstrap, and the backup named then restores',
    async () => {
      await stopAll();
      INITIAL.forEach(wipe);
      // A newer backup whose object lost a byte: its manifest still gives the size and sum it was written with.
      const name = newBackupName(new Date());
      const bytes = await getObject(snapshotKey(good.name));
      bytes[Math.floor(bytes.length / 2)] ^= 0xff;
      await putObject(snapshotKey(name), bytes);
      await putObject(manifestKey(name), manifestBytes({ ...good, name }));

      const waiting = pods.prepare('etcd-2', { env: restoreEnv(), waitSeconds: 8 });
      const notAsked = pods.prepare('etcd-1', { waitSeconds: 8 });
      const failed = await pods.prepare('etcd-0', { env: restoreEnv(), waitSeconds: 20 });
      expect(failed.code).toBe(1);
      const error = failed.lines.find((l) => l.level === 'error');
      expect(error).toMatchObject({ message: 'the restore failed; the data directory is as it was', step: 'download' });
      expect(String(error?.reason)).toContain(`backup ${name} read back holds ${bytes.length} bytes with sha256`);
      expect(String(error?.reason)).toContain(`its manifest says ${good.sizeBytes} bytes, ${good.sha256}`);
      expect(linesOf([failed], 'restore: chose a backup')).toEqual([expect.objectContaining({ backup: name })]);
      expect(fs.existsSync(pods.pod('etcd-0').dataDir)).toBe(false);
      expect(fs.existsSync(restoreWorkDir(pods.pod('etcd-0').dataDir))).toBe(false);

      const [other, asked] = await Promise.all([notAsked, waiting]);
      expect(other.code).toBe(1);
      expect(decided([other])).toBeUndefined();
      expect(other.lines.filter((l) => l.message === 'waiting').map((l) => String(l.reason))).toEqual(
        expect.arrayContaining([expect.stringContaining('must not bootstrap a second cluster beside it')]),
      );
      expect(asked.code).toBe(1);
      for (const n of INITIAL) expect(readDataDir(pods.pod(n).dataDir)).toEqual({ kind: 'empty' });

      const runs = await Promise.all(INITIAL.map((n) => prepareAndStart(n, restoreEnv({ ETCD_AGENT_RESTORE_BACKUP: good.name }))));
      expect(linesOf(runs[0], 'restore: chose a backup')).toEqual([expect.objectContaining({ backup: good.name })]);
      await votersAre(INITIAL);
      await expectAckedUpTo(good.revision);
    },
  );

  // The check reads the manifest only (origin-decision.ts), the same on every etcd version; the
  // restore it lets through is the one the disaster case proves on each.
  itOnFirstVersion(
    "when the newest backup is another cluster's, then the restore is refused with one line and nothing changed, and with ETCD_AGENT_RESTORE_FORCE it is restored",
    async () => {
      await stopAll();
      INITIAL.forEach(wipe);
      // Another cluster's backup, as its manifest says: other members, another id (its snapshot is this one's, so it restores whole).
      const name = newBackupName(new Date());
      const foreign: Manifest = {
        ...good,
        name,
        clusterId: 'feedfacecafe0001',
        members: [
          { name: 'orders-0', peerURLs: ['http://orders-0.orders-headless:2380'] },
          { name: 'etcd-1', peerURLs: ['http://etcd-1.other-namespace:2380'] },
        ],
      };
      await putObject(snapshotKey(name), await getObject(snapshotKey(good.name)));
      await putObject(manifestKey(name), manifestBytes(foreign));

      const others = Promise.all(['etcd-1', 'etcd-2'].map((n) => pods.prepare(n, { env: restoreEnv(), waitSeconds: 8 })));
      const refused = await pods.prepare('etcd-0', { env: restoreEnv(), waitSeconds: 20 });
      expect(refused.code).toBe(1);
      const errors = refused.lines.filter((l) => l.level === 'error');
      expect(errors).toEqual([expect.objectContaining({ message: 'the restore failed; the data directory is as it was', step: 'origin' })]);
      expect(String(errors[0].reason)).toContain(
        `backup ${name} of cluster feedfacecafe0001 was taken of members orders-0=http://orders-0.orders-headless:2380, etcd-1=http://etcd-1.other-namespace:2380`,
      );
      expect(String(errors[0].reason)).toContain('ETCD_AGENT_RESTORE_FORCE=true');
      for (const r of await others) expect(r.code).toBe(1);
      for (const n of INITIAL) {
        expect(readDataDir(pods.pod(n).dataDir)).toEqual({ kind: 'empty' });
        expect(fs.existsSync(restoreWorkDir(pods.pod(n).dataDir))).toBe(false);
      }

      const runs = await Promise.all(INITIAL.map((n) => prepareAndStart(n, restoreEnv({ ETCD_AGENT_RESTORE_FORCE: 'true' }))));
      expect(linesOf(runs[0], 'restore: chose a backup')).toEqual([
        expect.objectContaining({ backup: name, clusterId: 'feedfacecafe0001' }),
      ]);
      expect(linesOf(runs[0], "restore: another cluster's backup, forced")).toHaveLength(1);
      expect(linesOf(runs[0], 'restore: done')).toHaveLength(1);
      await votersAre(INITIAL);
      await expectAckedUpTo(good.revision);
    },
  );
  // A volume too small for the snapshot is this machine's problem, which no wait mends.
  asRoot(
    "when the data directory's volume has no room for the snapshot, then the restore is refused at once with one line naming the disk, not waited out as the store's, and nothing is left",
    async () => {
      await stopAll();
      INITIAL.forEach(wipe);
      const volume = path.dirname(pods.pod('etcd-0').dataDir);
      const [refused, ...others] = await withTmpfs(volume, '1m', async () => {
        const runs = await Promise.all([
          pods.prepare('etcd-0', { env: restoreEnv(theGood()), waitSeconds: 30 }),
          ...['etcd-1', 'etcd-2'].map((n) => pods.prepare(n, { env: restoreEnv(theGood()), waitSeconds: 8 })),
        ]);
        // What the restore wrote on the volume is gone with it.
        expect(fs.readdirSync(volume)).toEqual([]);
        return runs;
      });
      expect(refused.code).toBe(1);
      const errors = refused.lines.filter((l) => l.level === 'error');
      expect(errors).toEqual([expect.objectContaining({ message: 'the restore failed; the data directory is as it was', step: 'disk' })]);
      expect(String(errors[0].reason)).toContain('no space left on device');
      // Refused on the first try: no pass waited for the store.
      expect(linesOf([refused], 'waiting').filter((l) => String(l.reason).startsWith('restore:'))).toEqual([]);
      expect(linesOf([refused], 'restore: chose a backup')).toHaveLength(1);
      for (const r of others) expect(r.code).toBe(1);
      for (const n of INITIAL) expect(readDataDir(pods.pod(n).dataDir)).toEqual({ kind: 'empty' });
    },
  );
  // The restored member is renamed onto the data directory, which a mount point refuses.
  asRoot(
    'when the data directory is itself a mount point, then the restore is refused with one line before anything is downloaded, and nothing changed',
    async () => {
      await stopAll();
      INITIAL.forEach(wipe);
      const dataDir = pods.pod('etcd-0').dataDir;
      const refused = await withTmpfs(dataDir, '64m', async () => {
        const others = Promise.all(['etcd-1', 'etcd-2'].map((n) => pods.prepare(n, { env: restoreEnv(theGood()), waitSeconds: 8 })));
        const run = await pods.prepare('etcd-0', { env: restoreEnv(theGood()), waitSeconds: 30 });
        for (const r of await others) expect(r.code).toBe(1);
        expect(fs.readdirSync(dataDir)).toEqual([]);
        return run;
      });
      expect(refused.code).toBe(1);
      const errors = refused.lines.filter((l) => l.level === 'error');
      expect(errors).toEqual([expect.objectContaining({ message: 'the restore failed; the data directory is as it was', step: 'check' })]);
      expect(String(errors[0].reason)).toContain(`the data directory ${dataDir} is a mount point`);
      // Refused before the store was read or anything downloaded.
      expect(linesOf([refused], 'restore: chose a backup')).toEqual([]);
      expect(fs.existsSync(restoreWorkDir(dataDir))).toBe(false);
    },
  );

  // Where prepare looks for the tool is the agent's own logic, alike on every version.
  itOnFirstVersion(
    'when the restore setting stays in place and no restore tool is there, then pods that join or hold their data start, and only a pod that must restore stops (exit 2) with nothing changed',
    async () => {
      await stopAll();
      INITIAL.forEach(wipe);
      const noTool = { ETCD_AGENT_ETCDUTL: path.join(pods.root, 'no-such-etcdutl') };
      const others = Promise.all(['etcd-1', 'etcd-2'].map((n) => pods.prepare(n, { env: restoreEnv(theGood()), waitSeconds: 8 })));
      const stopped = await pods.prepare('etcd-0', { env: restoreEnv({ ...theGood(), ...noTool }), waitSeconds: 30 });
      expect(stopped.code).toBe(2);
      expect(stepsOf([stopped])).toEqual(['restore']);
      expect(stopped.lines.filter((l) => l.level === 'error')).toEqual([
        expect.objectContaining({ message: 'prepare cannot restore: no usable restore tool; nothing was changed' }),
      ]);
      expect(linesOf([stopped], 'restore: chose a backup')).toEqual([]);
      expect(readDataDir(pods.pod('etcd-0').dataDir)).toEqual({ kind: 'empty' });
      expect(fs.existsSync(restoreWorkDir(pods.pod('etcd-0').dataDir))).toBe(false);
      for (const r of await others) expect(r.code).toBe(1);

      // The restorer with its tool; the others, still without one, wait and join it.
      const runs = await Promise.all(
        INITIAL.map((n) => prepareAndStart(n, restoreEnv(n === 'etcd-0' ? theGood() : { ...theGood(), ...noTool }))),
      );
      expect(linesOf(runs[0], 'restore: done')).toHaveLength(1);
      for (const r of runs.slice(1)) expect(r.flatMap((x) => x.lines).filter((l) => l.level === 'error')).toEqual([]);
      await votersAre(INITIAL);

      // Its data in place, the restorer starts again as is, with the setting and still no tool.
      await pods.stopAgent('etcd-0');
      await pods.stopEtcd('etcd-0', true);
      const again = await prepareAndStart('etcd-0', restoreEnv({ ...theGood(), ...noTool }));
      expect(again.map((r) => r.code)).toEqual([0]);
      expect(decided(again)).toMatchObject({ state: 'existing', reason: expect.stringContaining('start as is') });
      await votersAre(INITIAL);
      await expectAckedUpTo(good.revision);
    },
  );
});
