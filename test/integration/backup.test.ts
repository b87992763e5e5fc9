/**
 * Backups of a real 3-member cluster (3.4–3.7) into a directory store and into S3 (versitygw), taken
 * through POST /v1/backups while a writer puts through every member: each one is a whole snapshot of a
 * follower whose manifest's sha256 is the object's, which the agent verified by restoring it, and which
 * a real etcd started on its restored data serves with every write acknowledged at or below its
 * revision. Then the verification on its own: POST /v1/backups/verify, the verification schedule,
 * damaged objects (each failing check recorded in the manifest, counted and logged), and the gauges of
 * the newest backup and verification as /metrics shows them.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DeleteObjectsCommand, GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { spawn } from 'node:child_process';
import type { RunningAgent } from '../../agent/agent';
import { findRestoreTool, restoreSnapshot } from '../../agent/backup/restore-tool';
import { DirStore } from '../../agent/backup/dir-store';
import { manifestBytes, manifestKey, newBackupName, snapshotKey } from '../../agent/backup/layout';
import { BackupSchedule } from '../../agent/backup/schedule';
import { verifyBackup } from '../../agent/backup/verify';
import { parseCron } from '../../agent/lib/cron';
import { readKeySpace } from '../../agent/etcd-data/key-space';
import { createLogger } from '../../agent/observability/logger';
import { binCommand } from '../../scripts/bin-command';
import { MAIN_JS } from '../helpers/built-agent';
import type { BackupResult, Manifest } from '../../agent/proto/backup';
import { lostWrites, restoredKeys, restoreToolPath, Writer } from '../helpers/backup-check';
import { startTestCluster, type LocalEtcdCluster } from '../helpers/etcd-cluster';
import { get, leaderOf, post, startMemberAgent } from '../helpers/membership';
import { startS3Server, type S3Server } from '../helpers/s3-server';
import { captureLogs } from '../helpers/log-capture';
import { eventually, patience } from '../helpers/eventually';
import { itOnFirstVersion } from '../helpers/version-scope';

const STORY_MS = 180_000;

/** The sum of the series of `name` in `agent`'s /metrics that carry every label of `labels` (0 when none does). */
async function metricOf(agent: RunningAgent, name: string, labels: Record<string, string>): Promise<number> {
  const text = (await get(agent, '/metrics')).text;
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let sum = 0;
  for (const line of text.split('\n')) {
    const series = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (series === null || series[1] !== name) continue;
    const has = (series[2] ?? '').split(',');
    if (wanted.every((pair) => has.includes(pair))) sum += Number(series[3]);
  }
  return sum;
}

/**
 * A backup through agents[0] while a writer puts through every member: a verified follower snapshot
 * whose object is the manifest's (size, sha256), and which a real etcd started on its restored data
 * serves with every write acknowledged at or below its revision. `snapshotFile` fetches the object.
 */
async function backupUnderWriter(
  cluster: LocalEtcdCluster,
  agents: RunningAgent[],
  snapshotFile: (name: string) => Promise<string>,
): Promise<void> {
  const leader = await leaderOf(cluster);
  const writer = new Writer(cluster.clientURLs()).start();
  await writer.acknowledged(50);
  const answer = await post(agents[0], '/v1/backups', {});
  await writer.acknowledged(writer.acked.length + 50);
  const acked = await writer.stop();

  expect(answer.status).toBe(200);
  const result = answer.json as BackupResult;
  const manifest = result.manifest as Manifest;
  expect(result.outcome).toBe('created');
  expect(manifest.member.name).not.toBe(leader.name);
  expect(cluster.members.map((m) => m.name)).toContain(manifest.member.name);

  const object = await snapshotFile(manifest.name);
  const bytes = fs.readFileSync(object);
  expect({ size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') }).toEqual({
    size: manifest.sizeBytes,
    sha256: manifest.sha256,
  });
  expect(manifest.verification).toMatchObject({ ok: true });
  if (manifest.verification?.ok !== true) throw new Error('not verified');
  expect(manifest.verification.revision).toBeGreaterThanOrEqual(manifest.revision);

  // Writes on both sides of the snapshot were acknowledged: the test proves something either way.
  expect(acked.some((w) => w.revision <= manifest.revision)).toBe(true);
  expect(acked.some((w) => w.revision > manifest.revision)).toBe(true);
  const keys = await restoredKeys(object);
  expect(lostWrites(acked, manifest.revision, keys)).toEqual([]);
  expect(manifest.verification.keys).toBe(keys.size);

  const listed = await get(agents[1], '/v1/backups');
  expect(listed.status).toBe(200);
  expect((listed.json as { backups: { name: string; state: string }[] }).backups).toEqual([
    { name: manifest.name, state: 'verified', manifest },
  ]);
}

describe('backups into a directory store', () => {
  let cluster: LocalEtcdCluster;
  let store: string;
  const agents: RunningAgent[] = [];

  beforeAll(async () => {
    cluster = await startTestCluster(3);
    store = fs.mkdtempSync(path.join(os.tmpdir(), 'backup-store-'));
    for (const m of cluster.members) {
      agents.push(
        await startMemberAgent(cluster, m.name, {
          ETCD_AGENT_BACKUP_STORE: store,
          ETCD_AGENT_ETCDUTL: restoreToolPath(),
          ETCD_AGENT_BACKUP_KEEP_LAST: '2',
        }),
      );
    }
  }, patience(60_000));

  afterAll(async () => {
    for (const a of agents) await a.stop();
    await cluster?.destroy();
    if (store !== undefined) fs.rmSync(store, { recursive: true, force: true });
  });

  it(
    'when a backup is taken under a writer, then it is a verified follower snapshot holding every write acknowledged at or below its revision',
    () => backupUnderWriter(cluster, agents, async (name) => path.join(store, name, 'snapshot.db')),
    patience(STORY_MS),
  );

  it(
    "when the keys of a backup outgrow the verification's memory budget, then counting them in shares gives the count etcd serves",
    async () => {
      const listed = (await get(agents[0], '/v1/backups')).json as { backups: { manifest: Manifest }[] };
      const manifest = listed.backups[0].manifest;
      const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'key-space-'));
      const restored = path.join(scratch, 'data');
      await restoreSnapshot(await findRestoreTool(restoreToolPath()), path.join(store, manifest.name, 'snapshot.db'), restored, {
        name: 'check',
        peerURL: 'http://127.0.0.1:2380',
      });
      try {
        const db = path.join(restored, 'member', 'snap', 'db');
        const whole = await readKeySpace(db);
        // A budget a few keys' worth: several passes, each holding only its share of the keys.
        const shared = await readKeySpace(db, 2_000);
        expect(shared).toEqual(whole);
        expect(whole.keys).toBe((await restoredKeys(path.join(store, manifest.name, 'snapshot.db'))).size);
      } finally {
        fs.rmSync(scratch, { recursive: true, force: true });
      }
    },
    patience(STORY_MS),
  );

  it(
    'when retention removes a backup while its verification writes the record, then the answer is not-found and no part of it is left',
    async () => {
      const listed = (await get(agents[0], '/v1/backups')).json as { backups: { name: string; manifest: Manifest }[] };
      const { name, manifest } = listed.backups[0];
      // A store of its own holding a copy of the backup, so the agents' store is left as it is.
      const own = fs.mkdtempSync(path.join(os.tmpdir(), 'backup-store-'));
      fs.cpSync(path.join(store, name), path.join(own, name), { recursive: true });
      const writeFile = fs.promises.writeFile.bind(fs.promises);
      const wrote: string[] = [];
      // Another agent's retention, as the record is about to be written: the manifest, the snapshot, the folder.
      const spy = jest.spyOn(fs.promises, 'writeFile').mockImplementation(async (file, data, options) => {
        if (String(file).startsWith(path.join(own, name))) {
          wrote.push(path.relative(own, String(file)));
          fs.rmSync(path.join(own, name), { recursive: true, force: true });
        }
        return writeFile(file, data, options);
      });
      try {
        const tool = await findRestoreTool(restoreToolPath());
        const verifying = verifyBackup({ store: new DirStore(own), tool }, { name, state: 'unverified', manifest });

        await expect(verifying).rejects.toMatchObject({
          code: 'not-found',
          message: expect.stringMatching(/was removed from .* while it was verified/),
        });
        expect(wrote).toEqual([expect.stringMatching(new RegExp(`^${name}/manifest\\.json\\.writing-`))]);
        expect(fs.readdirSync(own)).toEqual([]);
      } finally {
        spy.mockRestore();
        fs.rmSync(own, { recursive: true, force: true });
      }
    },
    patience(STORY_MS),
  );

  it(
    'when every agent asks for backups at once until it has made one, then the three runs overlap in no instant, and retention keeps the newest two',
    async () => {
      // Each agent calls until a backup of its own is made; a call that meets another agent's run
      // answers in-progress and is made again.
      const calls: { agent: number; sentAt: number; answeredAt: number; status: number; outcome: string }[] = [];
      const created = await Promise.all(
        agents.map((agent, i) =>
          eventually(
            async () => {
              const sentAt = Date.now();
              const a = await post(agent, '/v1/backups', {});
              calls.push({ agent: i, sentAt, answeredAt: Date.now(), status: a.status, outcome: String(a.json.outcome) });
              return a.json.outcome === 'created' ? (a.json as BackupResult) : false;
            },
            { within: 120_000, every: 100 },
          ),
        ),
      );
      for (const c of calls) expect([200, 202]).toContain(c.status);
      // The attempts overlapped: every agent's first call was sent before any call was answered.
      const firstSent = agents.map((_, i) => calls.find((c) => c.agent === i)?.sentAt ?? Infinity);
      expect(Math.max(...firstSent)).toBeLessThan(Math.min(...calls.map((c) => c.answeredAt)));
      // Three runs, one per agent, and the lock held each for its whole run: no two overlap.
      const manifests = created.map((r) => r.manifest as Manifest);
      expect(new Set(manifests.map((m) => m.agent))).toEqual(new Set(agents.map((a) => a.config.memberName)));
      const runs = manifests.map((m) => [Date.parse(m.startedAt), Date.parse(m.finishedAt)]).sort((x, y) => x[0] - y[0]);
      expect(runs).toHaveLength(3);
      for (let i = 1; i < runs.length; i++) expect(runs[i][0]).toBeGreaterThanOrEqual(runs[i - 1][1]);
      // Each one was restored by its verification, which runs outside the lock: unless the retention
      // after a newer backup removed it first, and then the answer says so and the store holds no part
      // of it.
      for (const r of created) {
        if (r.verification !== undefined) expect(r.verification).toMatchObject({ ok: true });
        else {
          expect(r.verificationNotRun).toMatch(/was removed from .* while it was verified/);
          expect(fs.readdirSync(store)).not.toContain((r.manifest as Manifest).name);
        }
      }
      // The newest one (and so one of those the listing below keeps) was verified itself.
      const newest = [...created].sort((x, y) => ((x.manifest as Manifest).name < (y.manifest as Manifest).name ? 1 : -1))[0];
      expect(newest.verification).toMatchObject({ ok: true });
      await post(agents[0], '/v1/backups', {});
      const listed = (await get(agents[2], '/v1/backups')).json as { backups: { name: string; state: string }[] };
      expect(listed.backups).toHaveLength(2);
      expect(listed.backups.map((b) => b.state)).toEqual(['verified', 'verified']);
      expect(fs.readdirSync(store).sort()).toEqual(listed.backups.map((b) => b.name).sort());
    },
    patience(STORY_MS),
  );

  it(
    'when `backup --to -` runs beside a writer, then stdout is a whole snapshot a real etcd restores with every write acknowledged before it began',
    async () => {
      const writer = new Writer(cluster.clientURLs(), 'cli').start();
      await writer.acknowledged(30);
      const before = writer.acked.length;
      const file = path.join(store, 'cli-snapshot.db');
      const [node, argv] = binCommand(MAIN_JS, ['backup', '--to', '-']);
      const child = spawn(node, argv, {
        env: { PATH: process.env.PATH, ETCD_AGENT_ENDPOINTS: cluster.clientURLs().join(','), ETCD_AGENT_MEMBER_NAME: 'cli' },
        stdio: ['ignore', fs.openSync(file, 'w'), 'pipe'],
      });
      let stderr = '';
      child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      const acked = await writer.stop();
      expect({ code, stderr: stderr.includes('"snapshot streamed"') }).toEqual({ code: 0, stderr: true });
      const streamed = JSON.parse(stderr.split('\n').find((l) => l.includes('"snapshot streamed"')) as string) as {
        revision: number;
        sizeBytes: number;
      };
      expect(streamed.sizeBytes).toBe(fs.statSync(file).size);
      const keys = await restoredKeys(file);
      expect(lostWrites(acked.slice(0, before), streamed.revision, keys)).toEqual([]);
      expect(acked.slice(0, before).every((w) => w.revision <= streamed.revision)).toBe(true);
      fs.rmSync(file);
    },
    patience(STORY_MS),
  );

  it(
    "when every agent's schedule fires for the same slot, then the slot gets exactly one backup",
    async () => {
      const counts = async (): Promise<Record<string, number>> => {
        const sum: Record<string, number> = {};
        for (const a of agents)
          for (const v of (await a.metrics.backup.backups.get()).values)
            sum[v.labels.outcome as string] = (sum[v.labels.outcome as string] ?? 0) + v.value;
        return sum;
      };
      const before = await counts();
      const slot = new Date();
      await Promise.all(
        agents.map((a) =>
          new BackupSchedule({
            backup: undefined,
            service: a.backups,
            logger: createLogger({ silent: true }),
            metrics: a.metrics,
          }).backupAt(slot),
        ),
      );
      const after = await counts();
      const made = (outcome: string): number => (after[outcome] ?? 0) - (before[outcome] ?? 0);
      const listed = (await get(agents[0], '/v1/backups')).json as { backups: { manifest: Manifest }[] };
      expect(listed.backups.filter((b) => Date.parse(b.manifest.startedAt) >= slot.getTime())).toHaveLength(1);
      // One agent made it; each other one found it made (in the store) or under way (holding the lock).
      expect({ created: made('created'), others: made('slot-taken') + made('in-progress'), failed: made('failed') }).toEqual({
        created: 1,
        others: 2,
        failed: 0,
      });
    },
    patience(STORY_MS),
  );
  // Which failures are verdicts is the agent's rule (verify-decision.ts); the tool here is a stand-in.
  itOnFirstVersion(
    'when the restore tool cannot run (killed, no room, a program without snapshot restore), then the backup is created but stays unverified, and neither the answer nor its manifest calls it failed',
    async () => {
      const tools = fs.mkdtempSync(path.join(os.tmpdir(), 'restore-tools-'));
      const tool = (name: string, version: string, restore: string): string => {
        const file = path.join(tools, name);
        fs.writeFileSync(file, `#!/bin/sh\nif [ "$1" = version ]; then echo "${version}"; exit 0; fi\n${restore}\n`, { mode: 0o755 });
        return file;
      };
      const cases: { why: string; tool: string; said: RegExp }[] = [
        { why: 'killed', tool: tool('etcdutl-killed', 'etcdutl version: 3.6.16', 'kill -9 $$'), said: /killed by SIGKILL/ },
        {
          why: 'no room',
          tool: tool('etcdutl-full', 'etcdutl version: 3.6.16', 'echo "Error: write db: no space left on device" >&2; exit 1'),
          said: /no space left on device/,
        },
        // etcdctl 3.6 prints its help for `snapshot restore` and exits 0: refused before it runs.
        {
          why: 'etcdctl 3.6',
          tool: tool('etcdctl', 'etcdctl version: 3.6.16', 'echo "NAME: snapshot"; exit 0'),
          said: /no snapshot restore/,
        },
      ];
      const made: string[] = [];
      try {
        for (const c of cases) {
          const agent = await startMemberAgent(cluster, cluster.members[1].name, {
            ETCD_AGENT_BACKUP_STORE: store,
            ETCD_AGENT_ETCDUTL: c.tool,
          });
          try {
            const failedBefore = await metricOf(agent, 'etcd_agent_backup_verifications_total', { result: 'failed' });
            const answer = await post(agent, '/v1/backups', {});
            const result = answer.json as BackupResult;
            made.push(result.manifest?.name ?? '');
            expect({ why: c.why, status: answer.status, outcome: result.outcome, verification: result.verification }).toEqual({
              why: c.why,
              status: 200,
              outcome: 'created',
              verification: undefined,
            });
            expect(result.verificationNotRun).toMatch(/could not run/);
            expect(result.verificationNotRun).toMatch(c.said);
            const name = result.manifest?.name ?? '';
            expect(JSON.parse(fs.readFileSync(path.join(store, name, 'manifest.json'), 'utf8')).verification).toBeUndefined();
            const again = await post(agent, '/v1/backups/verify', { name });
            expect({ status: again.status, code: again.json.error?.code, verification: again.json.error?.details?.verification }).toEqual({
              status: 503,
              code: 'unavailable',
              verification: 'could-not-run',
            });
            const listed = (await get(agent, '/v1/backups')).json.backups as { name: string; state: string }[];
            expect(listed.find((b) => b.name === name)?.state).toBe('unverified');
            // The backup's own verification is counted (a call to verify answers its failure to the caller).
            expect(await metricOf(agent, 'etcd_agent_backup_failures_total', { step: 'verify', reason: 'could-not-run' })).toBe(1);
            expect(await metricOf(agent, 'etcd_agent_backup_verifications_total', { result: 'failed' })).toBe(failedBefore);
          } finally {
            await agent.stop();
          }
        }
      } finally {
        for (const name of made) if (name !== '') fs.rmSync(path.join(store, name), { recursive: true, force: true });
        fs.rmSync(tools, { recursive: true, force: true });
      }
    },
    patience(STORY_MS),
  );
  // The single flight is the agent's own; the tool here is the real one behind a gate the test opens.
  itOnFirstVersion(
    'when a verification runs and more are asked, then one of the same backup joins it and one of another is answered busy: one read back and restore at a time',
    async () => {
      const listed = (await get(agents[0], '/v1/backups')).json.backups as { name: string }[];
      expect(listed.length).toBeGreaterThanOrEqual(2);
      const [first, other] = listed.map((b) => b.name);
      const gate = new RestoreGate();
      const agent = await startMemberAgent(cluster, cluster.members[2].name, {
        ETCD_AGENT_BACKUP_STORE: store,
        ETCD_AGENT_ETCDUTL: gate.wrapper,
      });
      try {
        const one = post(agent, '/v1/backups/verify', { name: first }, patience(120_000));
        await eventually(() => expect(gate.restores()).toHaveLength(1), { within: 30_000, every: 50 });
        const same = post(agent, '/v1/backups/verify', { name: first }, patience(120_000));
        const another = await post(agent, '/v1/backups/verify', { name: other });
        expect({ status: another.status, code: another.json.error?.code, verifying: another.json.error?.details?.verifying }).toEqual({
          status: 409,
          code: 'busy',
          verifying: first,
        });
        gate.open();
        const [a, b] = await Promise.all([one, same]);
        expect([a.status, b.status]).toEqual([200, 200]);
        expect((a.json as Manifest).verification).toMatchObject({ ok: true });
        // The one verification, answered to both.
        expect((b.json as Manifest).verification).toEqual((a.json as Manifest).verification);
        expect(gate.restores()).toHaveLength(1);
        // Once it ended, the other one runs.
        const then = await post(agent, '/v1/backups/verify', { name: other }, patience(120_000));
        expect({ status: then.status, ok: (then.json as Manifest).verification?.ok }).toEqual({ status: 200, ok: true });
        expect(gate.restores()).toHaveLength(2);
      } finally {
        gate.open();
        await agent.stop();
        gate.remove();
      }
    },
    patience(STORY_MS),
  );
  // Retention runs outside the lock on every agent; the overlap is forced by holding the restore.
  itOnFirstVersion(
    "when another agent's retention removes a backup while it is verified, then the answer is not-found and nothing of it is left in the store",
    async () => {
      const taken = await post(agents[0], '/v1/backups', { verify: false, timeoutSeconds: 60 }, patience(120_000));
      expect(taken.status).toBe(200);
      const name = (taken.json as BackupResult).manifest?.name as string;
      const gate = new RestoreGate();
      const agent = await startMemberAgent(cluster, cluster.members[2].name, {
        ETCD_AGENT_BACKUP_STORE: store,
        ETCD_AGENT_ETCDUTL: gate.wrapper,
      });
      try {
        const verifying = post(agent, '/v1/backups/verify', { name }, patience(120_000));
        await eventually(() => expect(gate.restores()).toHaveLength(1), { within: 30_000, every: 50 });
        // As retention removes a backup: its manifest, then its snapshot.
        await new DirStore(store).remove([manifestKey(name), snapshotKey(name)]);
        gate.open();
        const answer = await verifying;
        expect({ status: answer.status, code: answer.json.error?.code }).toEqual({ status: 404, code: 'not-found' });
        expect(answer.json.error?.message).toContain('removed');
        expect(fs.existsSync(path.join(store, name))).toBe(false);
        const listing = (await get(agents[0], '/v1/backups')).json as { backups: { name: string }[]; broken: { name: string }[] };
        expect([...listing.backups, ...listing.broken].map((b) => b.name)).not.toContain(name);
      } finally {
        gate.open();
        await agent.stop();
        gate.remove();
      }
    },
    patience(STORY_MS),
  );
});

/** The real restore tool behind a gate: each restore is recorded, then held until the test opens the gate. */
class RestoreGate {
  private readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'restore-gate-'));
  /** The wrapper to give the agent as its ETCDUTL. */
  readonly wrapper = path.join(this.dir, 'etcdutl');

  constructor() {
    fs.writeFileSync(
      this.wrapper,
      [
        '#!/bin/sh',
        `if [ "$1" = snapshot ]; then echo "$3" >>"${this.dir}/restores"; while [ ! -e "${this.dir}/open" ]; do sleep 0.05; done; fi`,
        `exec "${restoreToolPath()}" "$@"`,
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
  }

  /** The snapshots restored so far (each as the tool was given it). */
  restores(): string[] {
    const file = path.join(this.dir, 'restores');
    return fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim().split('\n') : [];
  }

  /** Lets every restore held, and every later one, go on. */
  open(): void {
    fs.writeFileSync(path.join(this.dir, 'open'), '');
  }

  remove(): void {
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

describe('backups into S3', () => {
  let cluster: LocalEtcdCluster;
  let s3: S3Server;
  const agents: RunningAgent[] = [];
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'backup-s3-'));

  /** The log of agents[0]. */
  const logs = captureLogs();

  beforeAll(async () => {
    cluster = await startTestCluster(3);
    s3 = await startS3Server();
    // The AWS SDK reads its credentials from the process's environment, as a pod's agent would.
    Object.assign(process.env, s3.env);
    for (const [i, m] of cluster.members.entries()) {
      agents.push(
        await startMemberAgent(
          cluster,
          m.name,
          { ETCD_AGENT_BACKUP_STORE: s3.location, ETCD_AGENT_ETCDUTL: restoreToolPath() },
          i === 0 ? createLogger({ stream: logs.stream }) : undefined,
        ),
      );
    }
  }, patience(60_000));

  /** An object of the bucket, by its key under the store's prefix. */
  const getObject = async (key: string): Promise<Buffer> => {
    const answer = await s3.client().send(new GetObjectCommand({ Bucket: s3.bucket, Key: `cluster-a/${key}` }));
    return Buffer.from(await (answer.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
  };
  const putObject = async (key: string, body: Buffer): Promise<void> => {
    await s3.client().send(new PutObjectCommand({ Bucket: s3.bucket, Key: `cluster-a/${key}`, Body: body, ContentLength: body.length }));
  };
  /** The newest verified backup the store lists. */
  const newestVerified = async (): Promise<Manifest> => {
    const listed = (await get(agents[0], '/v1/backups')).json as { backups: { state: string; manifest: Manifest }[] };
    const found = listed.backups.find((b) => b.state === 'verified');
    if (found === undefined) throw new Error('no verified backup is listed');
    return found.manifest;
  };

  afterAll(async () => {
    for (const a of agents) await a.stop();
    for (const key of Object.keys(s3?.env ?? {})) delete process.env[key];
    await s3?.close();
    await cluster?.destroy();
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  it(
    'when a backup is taken under a writer, then the object in the bucket is a verified follower snapshot holding every acknowledged write',
    () =>
      backupUnderWriter(cluster, agents, async (name) => {
        const file = path.join(scratch, `${name}.db`);
        const object = await s3.client().send(new GetObjectCommand({ Bucket: s3.bucket, Key: `cluster-a/${name}/snapshot.db` }));
        fs.writeFileSync(file, await (object.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
        return file;
      }),
    patience(STORY_MS),
  );

  // The verification and its gauges are the agent's own logic; etcd's restore tool runs in it as in
  // the backup above, proven on every version there.
  itOnFirstVersion(
    'when POST /v1/backups/verify is called, then the backup named (or the newest) is verified again, its record written to the store, and /metrics shows the newest backup and the newest verification',
    async () => {
      const before = await newestVerified();
      const okBefore = await metricOf(agents[0], 'etcd_agent_backup_verifications_total', { result: 'ok' });
      const named = await post(agents[0], '/v1/backups/verify', { name: before.name }, 120_000);
      expect(named.status).toBe(200);
      // The answer is the manifest, after the request id every answer carries first.
      const again: Manifest & { requestId?: string } = { ...named.json };
      expect(again.requestId).toEqual(expect.any(String));
      delete again.requestId;
      expect(again).toEqual({
        ...before,
        verification: expect.objectContaining({ ok: true, keys: (before.verification as { keys: number }).keys }),
      });
      expect(Date.parse(again.verification?.verifiedAt ?? '')).toBeGreaterThan(Date.parse(before.verification?.verifiedAt ?? ''));
      // The record is the store's, which every agent reads.
      expect(JSON.parse((await getObject(`${before.name}/manifest.json`)).toString())).toEqual(again);
      expect((await get(agents[2], '/v1/backups')).json.backups[0]).toEqual({ name: before.name, state: 'verified', manifest: again });

      const newest = await post(agents[0], '/v1/backups/verify', {}, 120_000);
      expect(newest.status).toBe(200);
      expect((newest.json as Manifest).name).toBe(before.name);
      expect(await metricOf(agents[0], 'etcd_agent_backup_verifications_total', { result: 'ok' })).toBe(okBefore + 2);
      const missing = await post(agents[0], '/v1/backups/verify', { name: '20001204T230000.123Z-000000' });
      expect({ status: missing.status, code: missing.json.error?.code }).toEqual({ status: 404, code: 'not-found' });

      // The gauges say what the store holds: the newest backup, and the newest verification.
      const latest = (newest.json as Manifest).verification as { verifiedAt: string; durationMs: number };
      expect({
        lastSuccess: await metricOf(agents[0], 'etcd_agent_backup_last_success_timestamp_seconds', {}),
        lastSuccessSize: await metricOf(agents[0], 'etcd_agent_backup_last_success_size_bytes', {}),
        lastSuccessDuration: await metricOf(agents[0], 'etcd_agent_backup_last_success_duration_seconds', {}),
        lastVerification: await metricOf(agents[0], 'etcd_agent_backup_last_verification_timestamp_seconds', {}),
        lastVerificationSize: await metricOf(agents[0], 'etcd_agent_backup_last_verification_size_bytes', {}),
        lastVerificationDuration: await metricOf(agents[0], 'etcd_agent_backup_last_verification_duration_seconds', {}),
      }).toEqual({
        lastSuccess: Date.parse(before.finishedAt) / 1000,
        lastSuccessSize: before.sizeBytes,
        lastSuccessDuration: before.durationMs / 1000,
        lastVerification: Date.parse(latest.verifiedAt) / 1000,
        lastVerificationSize: before.sizeBytes,
        lastVerificationDuration: latest.durationMs / 1000,
      });
    },
    patience(STORY_MS),
  );

  itOnFirstVersion(
    'when the verification schedule fires, then the newest backup is verified again and the firing ends in one log line',
    async () => {
      const before = await newestVerified();
      const scheduleLogs = captureLogs();
      // A clock 200 ms before a minute's start: "every minute" fires at once, the schedule's own timer and all.
      const minute = 60_000;
      const skew = Math.ceil(Date.now() / minute) * minute + minute - 200 - Date.now();
      const schedule = new BackupSchedule({
        verify: parseCron('* * * * *'),
        service: agents[0].backups,
        logger: createLogger({ stream: scheduleLogs.stream }),
        metrics: agents[0].metrics,
        now: () => Date.now() + skew,
      });
      schedule.start();
      try {
        const done = await eventually(
          () => {
            const line = scheduleLogs
              .text()
              .split('\n')
              .find((l) => l.includes('"scheduled verification done"'));
            return line === undefined ? false : (JSON.parse(line) as { name: string; ok: boolean; requestId: string });
          },
          { within: 60_000 },
        );
        expect(done).toMatchObject({ name: before.name, ok: true, requestId: expect.stringMatching(/^verify-schedule-.*:00\.000Z$/) });
      } finally {
        await schedule.stop();
      }
      const after = await newestVerified();
      expect(after.name).toBe(before.name);
      expect(Date.parse(after.verification?.verifiedAt ?? '')).toBeGreaterThan(Date.parse(before.verification?.verifiedAt ?? ''));
    },
    patience(STORY_MS),
  );

  // Whether etcd's own restore tool refuses a snapshot is the tool's, so this runs on every version.
  it(
    'when snapshot objects in the store are damaged, then each verification fails naming the check that failed, is counted and logged, the backup is listed failed, and the gauges still show the newest verified one',
    async () => {
      const good = await newestVerified();
      const original = await getObject(`${good.name}/snapshot.db`);
      const flipped = Buffer.from(original);
      flipped[Math.floor(flipped.length / 2)] ^= 0xff;
      const junk = randomBytes(64 * 1024);
      const withEtcdHash = Buffer.concat([junk, createHash('sha256').update(junk).digest()]);
      const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
      const cases: { check: string; object: Buffer; manifest: Partial<Manifest> }[] = [
        // The object lost a byte after its manifest was written.
        { check: 'sha256', object: flipped, manifest: {} },
        // Damaged before it reached the store: the manifest's sum is of the damaged bytes, etcd's own is not.
        { check: 'etcd-hash', object: flipped, manifest: { sizeBytes: flipped.length, sha256: sha(flipped) } },
        // Both sums agree, but it is no etcd backend: the restore tool refuses it.
        { check: 'restore', object: withEtcdHash, manifest: { sizeBytes: withEtcdHash.length, sha256: sha(withEtcdHash) } },
      ];
      const failedBefore = await metricOf(agents[0], 'etcd_agent_backup_verifications_total', { result: 'failed' });
      const verifiedAt = await metricOf(agents[0], 'etcd_agent_backup_last_verification_timestamp_seconds', {});
      const names: string[] = [];
      for (const [i, c] of cases.entries()) {
        const name = newBackupName(new Date(Date.now() + i));
        names.push(name);
        const fields: Manifest = { ...good };
        delete fields.verification;
        await putObject(`${name}/snapshot.db`, c.object);
        await putObject(`${name}/manifest.json`, manifestBytes({ ...fields, ...c.manifest, name, finishedAt: new Date().toISOString() }));
        const answer = await post(agents[0], '/v1/backups/verify', { name }, 120_000);
        expect(answer.status).toBe(200);
        const verification = (answer.json as Manifest).verification;
        expect(verification).toMatchObject({ ok: false, check: c.check, error: expect.any(String) });
        expect(JSON.parse((await getObject(`${name}/manifest.json`)).toString()).verification).toEqual(verification);
        expect(await metricOf(agents[0], 'etcd_agent_backup_failures_total', { step: 'verify', reason: c.check })).toBe(1);
      }
      const listed = (await get(agents[1], '/v1/backups')).json.backups as { name: string; state: string }[];
      expect(listed.filter((b) => names.includes(b.name)).map((b) => b.state)).toEqual(['failed', 'failed', 'failed']);
      expect(await metricOf(agents[0], 'etcd_agent_backup_verifications_total', { result: 'failed' })).toBe(failedBefore + 3);
      const lines = logs
        .text()
        .split('\n')
        .filter((l) => l.includes('"backup failed its verification"'))
        .map((l) => JSON.parse(l) as { name: string; check: string; level: string });
      expect(lines.map(({ name, check, level }) => ({ name, check, level }))).toEqual(
        cases.map((c, i) => ({ name: names[i], check: c.check, level: 'error' })),
      );
      // The newest whole backup is a failed one now; the newest verification is still the good one's.
      expect(await metricOf(agents[0], 'etcd_agent_backup_last_verification_timestamp_seconds', {})).toBe(verifiedAt);
      expect(await metricOf(agents[0], 'etcd_agent_backup_last_success_size_bytes', {})).toBe(withEtcdHash.length);
      await s3.client().send(
        new DeleteObjectsCommand({
          Bucket: s3.bucket,
          Delete: { Objects: names.flatMap((n) => [`cluster-a/${n}/manifest.json`, `cluster-a/${n}/snapshot.db`].map((Key) => ({ Key }))) },
        }),
      );
    },
    patience(STORY_MS),
  );
});
