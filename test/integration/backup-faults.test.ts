/**
 * Backups into a real S3 server (versitygw) when the store fails: down then back, refusing the
 * credentials, without the bucket, silent, slow (a throttled link: within the store timeout the
 * backup completes whole, beyond it it fails as a timeout), and the agent SIGKILLed in the middle of
 * an upload. Each failure is answered with the store's reason, counted and logged, and leaves nothing
 * listed that is not whole; once the cause is gone the next backup succeeds; health and membership
 * calls answer as before, also while a failing backup is under way (the agent's own log places each
 * answer inside the run).
 */
import { GetObjectCommand, ListMultipartUploadsCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { createHash } from 'node:crypto';
import type { RunningAgent } from '../../agent/agent';
import type { BackupResult, Manifest } from '../../agent/proto/backup';
import { HttpClient } from '../../scripts/bench/http';
import { openSnapshotCalls, restoreToolPath, snapshotCalls } from '../helpers/backup-check';
import { createLogger } from '../../agent/observability/logger';
import { ChildAgent, MAIN_JS } from '../helpers/child-agent';
import { captureLogs } from '../helpers/log-capture';
import { startTestCluster, type LocalEtcdCluster } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';
import { etcdAcceptsChanges, get, post, startMemberAgent } from '../helpers/membership';
import { startS3Server, type S3Server } from '../helpers/s3-server';
import { TcpProxy } from '../helpers/tcp-proxy';

const STORY_MS = 180_000;

/** One health or member-list answer, recorded while a backup ran. */
interface Probed {
  path: string;
  status: number;
  // The body as the agent sent it; the checks look into it field by field.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  requestId: string;
}
/** A store request's own deadline in these tests (ETCD_AGENT_BACKUP_STORE_TIMEOUT_SECONDS). */
const STORE_TIMEOUT_SECONDS = 3;
/** The S3 store's part size. */
const PART_BYTES = 8 * 1024 * 1024;
/** A slow link that still carries a part within a generous request timeout. */
const SLOW_BYTES_PER_SECOND = 4 * 1024 * 1024;
/** A link on which one part takes longer than STORE_TIMEOUT_SECONDS. */
const TOO_SLOW_BYTES_PER_SECOND = 1024 * 1024;
/** The agent's promise: SIGTERM stops it, exit 0, within 5 s (docs/api.md §2). */
const STOP_DEADLINE_MS = 5000;
/** How long a snapshot may send nothing while the store waits for it, in these tests (ETCD_AGENT_BACKUP_SNAPSHOT_IDLE_SECONDS). */
const SNAPSHOT_IDLE_SECONDS = 3;

/** The store failure and step a refused backup names. */
function failureOf(answer: { status: number; json: { error?: { code?: string; details?: Record<string, unknown> } } }): object {
  const error = answer.json.error;
  return { status: answer.status, code: error?.code, store: error?.details?.store, step: error?.details?.step };
}

describe('backups when the S3 store fails', () => {
  let cluster: LocalEtcdCluster;
  let s3: S3Server;
  const started: RunningAgent[] = [];
  /** The log of the newest agent agentWith started. */
  let logs: ReturnType<typeof captureLogs>;

  /**
   * The agent of member 0 (the previous one stopped). The AWS SDK reads its credentials from the
   * process's own environment: the in-process agent gets `credentials` there, as a pod's would.
   */
  const agentWith = async (env: Record<string, string>, credentials: Record<string, string> = s3.env): Promise<RunningAgent> => {
    for (const a of started.splice(0)) await a.stop();
    Object.assign(process.env, credentials);
    logs = captureLogs();
    const agent = await startMemberAgent(
      cluster,
      cluster.members[0].name,
      { ETCD_AGENT_ETCDUTL: restoreToolPath(), ETCD_AGENT_BACKUP_STORE_TIMEOUT_SECONDS: String(STORE_TIMEOUT_SECONDS), ...env },
      createLogger({ stream: logs.stream }),
    );
    started.push(agent);
    return agent;
  };

  /** The objects and the unfinished uploads under the bucket. */
  const bucket = async (): Promise<{ objects: string[]; uploads: string[] }> => {
    const client = s3.client();
    const objects = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket }));
    const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket }));
    return { objects: (objects.Contents ?? []).map((o) => o.Key ?? ''), uploads: (uploads.Uploads ?? []).map((u) => u.Key ?? '') };
  };

  /** A health answer's HTTP status and verdict, and its reasons when the verdict is not `healthy`, so that a failure names them. */
  const healthSaid = (a: { status: number; json: { status?: unknown; errors?: unknown } }): Record<string, unknown> =>
    a.json.status === 'healthy'
      ? { status: a.status, health: a.json.status }
      : { status: a.status, health: a.json.status, errors: a.json.errors };

  /** Health and membership answer as before, whatever the store does. */
  const unaffected = async (agent: RunningAgent): Promise<void> => {
    expect((await get(agent, '/v1/members')).status).toBe(200);
    expect(healthSaid(await get(agent, '/v1/health'))).toEqual({ status: 200, health: 'healthy' });
  };

  /** The `backup failed` log lines so far, as step and message. */
  const failedLines = (): { step: unknown; error: unknown }[] =>
    logs
      .text()
      .split('\n')
      .filter((l) => l.includes('"backup failed"'))
      .map((l) => JSON.parse(l) as { step: unknown; error: unknown })
      .map(({ step, error }) => ({ step, error }));

  /**
   * Health and member-list calls, one after another, until `until` settles; each answer with its
   * request id, which the agent's log line of the request carries too.
   */
  const probeUntil = async (agent: RunningAgent, until: Promise<unknown>): Promise<Probed[]> => {
    const answers: Probed[] = [];
    let settled = false;
    void until.then(
      () => (settled = true),
      () => (settled = true),
    );
    for (let i = 0; !settled; i++) {
      const path = i % 2 === 0 ? '/v1/health' : '/v1/members';
      const a = await get(agent, path);
      answers.push({ path, status: a.status, body: a.json, requestId: String(a.headers['x-request-id']) });
    }
    return answers;
  };

  /** The answers among `answers` that the agent gave between its first `from` log line and the `to` after it. */
  const answeredBetween = (answers: Probed[], from: string, to: string): Probed[] => {
    const lines = logs
      .text()
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as { message?: string; requestId?: string });
    const start = lines.findIndex((l) => l.message === from);
    const end = lines.findIndex((l, i) => i > start && l.message === to);
    if (start < 0 || end < 0) throw new Error(`no "${from}" line followed by a "${to}" line in the agent's log`);
    const ids = new Set(lines.slice(start + 1, end).flatMap((l) => (l.message === 'request' ? [l.requestId] : [])));
    return answers.filter((a) => ids.has(a.requestId));
  };

  /** Health and the member list answered correctly inside the run, at least once each. */
  const answeredThroughout = (inside: Probed[]): void => {
    expect(inside.filter((a) => a.path === '/v1/health').length).toBeGreaterThan(0);
    expect(inside.filter((a) => a.path === '/v1/members').length).toBeGreaterThan(0);
    for (const a of inside) {
      if (a.path === '/v1/health') expect(healthSaid({ status: a.status, json: a.body })).toEqual({ status: 200, health: 'healthy' });
      else expect({ status: a.status, members: a.body.members?.length }).toEqual({ status: 200, members: cluster.members.length });
    }
  };

  /** Puts the values `big/<from>` … of 100 kB each, `count` of them. */
  const putLarge = async (from: number, count: number): Promise<void> => {
    const http = new HttpClient(cluster.members[0].clientURL);
    try {
      const value = Buffer.alloc(100_000, 'x').toString('base64');
      for (let i = from; i < from + count; i++) {
        const put = await http.post('/v3/kv/put', { key: Buffer.from(`big/${i}`).toString('base64'), value }, 10_000);
        expect(put.status).toBe(200);
      }
    } finally {
      http.close();
    }
  };

  /** A database far larger than the two parts an upload reads at once (400 values of 100 kB more), written once per file. */
  let large: Promise<void> | undefined;
  const largeDatabase = (): Promise<void> => (large ??= putLarge(0, 400));

  const failures = async (agent: RunningAgent, step: string, reason: string): Promise<number> =>
    (await agent.metrics.backup.failures.get()).values.find((v) => v.labels.step === step && v.labels.reason === reason)?.value ?? 0;

  beforeAll(async () => {
    cluster = await startTestCluster(3);
    s3 = await startS3Server();
  }, patience(60_000));

  afterAll(async () => {
    for (const a of started) await a.stop();
    for (const key of Object.keys(s3?.env ?? {})) delete process.env[key];
    await s3?.close();
    await cluster?.destroy();
  });

  it(
    'when the store is down, then the backup fails as unreachable, nothing is listed, and once it is back the next one succeeds',
    async () => {
      const agent = await agentWith({ ETCD_AGENT_BACKUP_STORE: s3.location });
      await s3.stop();
      try {
        const refused = await post(agent, '/v1/backups', {});
        expect(failureOf(refused)).toEqual({ status: 503, code: 'unavailable', store: 'unreachable', step: 'upload' });
        expect(refused.json.error.retryable).toBe(true);
        expect(await failures(agent, 'upload', 'unreachable')).toBe(1);
        expect(failedLines()).toEqual([{ step: 'upload', error: refused.json.error.message }]);
        await unaffected(agent);
        expect((await get(agent, '/v1/backups')).json.error.details?.store).toBe('unreachable');
      } finally {
        await s3.start();
      }
      expect(await bucket()).toEqual({ objects: [], uploads: [] });
      const taken = await post(agent, '/v1/backups', {});
      expect({ status: taken.status, error: taken.json.error }).toEqual({ status: 200 });
      expect((taken.json as BackupResult).verification).toMatchObject({ ok: true });
      expect((await get(agent, '/v1/backups')).json.backups).toHaveLength(1);
    },
    patience(STORY_MS),
  );

  it.each<[string, (s: S3Server) => [settings: Record<string, string>, credentials: Record<string, string>], string]>([
    [
      'the store refuses the credentials',
      (s) => [{ ETCD_AGENT_BACKUP_STORE: s.location }, { ...s.env, AWS_SECRET_ACCESS_KEY: 'not-the-secret' }],
      'credentials',
    ],
    [
      'the bucket does not exist',
      (s) => [{ ETCD_AGENT_BACKUP_STORE: s.location.replace(`s3://${s.bucket}/`, 's3://no-such-bucket/') }, s.env],
      'no-bucket',
    ],
  ])(
    'when %s, then the backup fails with that reason, not retryable, and names no secret; once fixed, the next one succeeds',
    async (_, setup, reason) => {
      const agent = await agentWith(...setup(s3));
      const before = await bucket();
      const refused = await post(agent, '/v1/backups', {});
      expect(failureOf(refused)).toEqual({ status: 503, code: 'unavailable', store: reason, step: 'upload' });
      expect(refused.json.error.retryable).toBe(false);
      expect(refused.text).not.toContain(s3.secretKey);
      expect(refused.text).not.toContain('not-the-secret');
      expect(await failures(agent, 'upload', reason)).toBe(1);
      expect(failedLines()).toEqual([{ step: 'upload', error: refused.json.error.message }]);
      expect(logs.text()).not.toContain(s3.secretKey);
      expect(await bucket()).toEqual(before);
      await unaffected(agent);

      // The cause fixed (the right secret, the right bucket): the next backup succeeds.
      const fixed = await agentWith({ ETCD_AGENT_BACKUP_STORE: s3.location });
      const taken = await post(fixed, '/v1/backups', {});
      expect({ status: taken.status, error: taken.json.error }).toEqual({ status: 200 });
      expect((taken.json as BackupResult).verification).toMatchObject({ ok: true });
      const listed = (await get(fixed, '/v1/backups')).json.backups as { name: string; state: string }[];
      expect(listed[0]).toMatchObject({ name: (taken.json as BackupResult).manifest?.name, state: 'verified' });
    },
    patience(STORY_MS),
  );

  it(
    'when the store goes silent, then the backup fails as a timeout while health and members answer throughout, and the next one, once it answers, succeeds',
    async () => {
      const proxy = await TcpProxy.start(s3.directEndpoint);
      try {
        const agent = await agentWith({ ETCD_AGENT_BACKUP_STORE: s3.location.replace(s3.endpoint, proxy.url) });
        const before = (await get(agent, '/v1/backups')).json.backups as unknown[];
        proxy.freeze();
        const call = post(agent, '/v1/backups', {});
        const probed = await probeUntil(agent, call);
        const refused = await call;
        answeredThroughout(answeredBetween(probed, 'backup asked', 'backup failed'));
        expect(failureOf(refused)).toMatchObject({ status: 504, code: 'timeout', store: 'timeout' });
        expect(await failures(agent, String(refused.json.error.details?.step), 'timeout')).toBe(1);
        expect(failedLines()).toEqual([{ step: refused.json.error.details?.step, error: refused.json.error.message }]);
        await unaffected(agent);
        proxy.thaw();
        expect((await get(agent, '/v1/backups')).json.backups).toEqual(before);
        const taken = await post(agent, '/v1/backups', {});
        expect({ status: taken.status, error: taken.json.error }).toEqual({ status: 200 });
        expect((taken.json as BackupResult).verification).toMatchObject({ ok: true });
        expect((await get(agent, '/v1/backups')).json.backups).toHaveLength(before.length + 1);
      } finally {
        await proxy.close();
      }
    },
    patience(STORY_MS),
  );

  it(
    'when the agent is SIGKILLed in the middle of an upload, then no backup is listed, and the next run aborts the upload it left and succeeds',
    async () => {
      // More than the crash point's 16 MiB: 240 values of 100 kB.
      await putLarge(0, 240);
      const listedBefore = (await bucket()).objects.filter((k) => k.endsWith('manifest.json'));
      const env = {
        ...s3.env,
        ETCD_AGENT_ENDPOINTS: cluster.clientURLs().join(','),
        ETCD_AGENT_LOCAL_ENDPOINT: cluster.members[0].clientURL,
        ETCD_AGENT_MEMBER_NAME: cluster.members[0].name,
        ETCD_AGENT_BACKUP_STORE: s3.location,
        ETCD_AGENT_ETCDUTL: restoreToolPath(),
      };
      const child = await ChildAgent.start(MAIN_JS, { ...env, ETCD_AGENT_CRASH_POINTS: 'backup-uploading' });
      const call = post(child.url, '/v1/backups', {}).catch((err: Error) => err);
      // The call never answers: the agent dies at the crash point first (an answer here says why it did not).
      const first = await Promise.race([call, child.exited.then(() => undefined)]);
      if (first !== undefined && 'status' in first) throw new Error(`the backup answered before the crash point: ${first.text}`);
      await child.exited;
      // A connection error (of another realm than this test's, so no `instanceof Error`), not an answer.
      expect(await call).not.toHaveProperty('status');
      const left = await bucket();
      expect(left.uploads).toHaveLength(1);
      expect(left.objects.filter((k) => k.endsWith('manifest.json'))).toEqual(listedBefore);
      expect(left.objects.filter((k) => left.uploads[0] === k)).toEqual([]);

      // The same member's agent again: its dead incarnation's lock is taken over at once.
      const again = await agentWith({ ETCD_AGENT_BACKUP_STORE: s3.location });
      const taken = await eventually(
        async () => {
          const a = await post(again, '/v1/backups', {});
          return a.status === 200 ? (a.json as BackupResult) : false;
        },
        { within: 60_000, every: 1000 },
      );
      expect(taken.abortedUploads).toEqual(left.uploads.map((k) => k.replace(/^cluster-a\//, '')));
      const aborted = logs
        .text()
        .split('\n')
        .filter((l) => l.includes('"aborted unfinished backup uploads"'))
        .map((l) => (JSON.parse(l) as { uploads: string[] }).uploads);
      expect(aborted).toEqual([taken.abortedUploads]);
      expect(taken.verification).toMatchObject({ ok: true });
      expect((await bucket()).uploads).toEqual([]);
      await unaffected(again);
    },
    patience(STORY_MS),
  );

  it(
    'when the store is slow but progressing, then the backup completes and is whole, while health and members answer throughout',
    async () => {
      const proxy = await TcpProxy.start(s3.directEndpoint);
      try {
        // A part takes a couple of seconds through the link: inside the request timeout given here.
        const agent = await agentWith({
          ETCD_AGENT_BACKUP_STORE: s3.location.replace(s3.endpoint, proxy.url),
          ETCD_AGENT_BACKUP_STORE_TIMEOUT_SECONDS: '60',
        });
        proxy.throttle(SLOW_BYTES_PER_SECOND);
        const call = post(agent, '/v1/backups', { timeoutSeconds: 60 }, 120_000);
        const probed = await probeUntil(agent, call);
        const taken = await call;
        expect({ status: taken.status, error: taken.json.error }).toEqual({ status: 200 });
        const result = taken.json as BackupResult;
        const manifest = result.manifest as Manifest;
        expect(result.verification).toMatchObject({ ok: true });
        // Several parts went through the slow link.
        expect(manifest.sizeBytes).toBeGreaterThan(2 * PART_BYTES);
        // Whole: the object in the bucket is what the manifest says.
        const object = await s3.client().send(new GetObjectCommand({ Bucket: s3.bucket, Key: `cluster-a/${manifest.name}/snapshot.db` }));
        const bytes = Buffer.from(await (object.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
        expect({ size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') }).toEqual({
          size: manifest.sizeBytes,
          sha256: manifest.sha256,
        });
        answeredThroughout(answeredBetween(probed, 'backup started', 'backup verified'));
      } finally {
        await proxy.close();
      }
    },
    patience(STORY_MS),
  );

  it(
    "when the store is too slow for its request timeout, then the backup fails as a timeout, leaves no upload behind, etcd's Snapshot call is cancelled, health and members answer throughout, and the next one at full speed succeeds",
    async () => {
      // Far more than the two parts read before the first one times out: etcd still has most of the
      // snapshot to send when the store fails, so its Snapshot call stays open unless the agent ends it.
      await largeDatabase();
      const proxy = await TcpProxy.start(s3.directEndpoint);
      try {
        // An 8 MiB part takes 8 s through the link, more than the 3 s a store request may take here.
        const agent = await agentWith({ ETCD_AGENT_BACKUP_STORE: s3.location.replace(s3.endpoint, proxy.url) });
        const before = await bucket();
        proxy.throttle(TOO_SLOW_BYTES_PER_SECOND);
        const call = post(agent, '/v1/backups', { timeoutSeconds: 60 }, 120_000);
        const probed = await probeUntil(agent, call);
        const refused = await call;
        expect(failureOf(refused)).toEqual({ status: 504, code: 'timeout', store: 'timeout', step: 'upload' });
        expect(refused.json.error.retryable).toBe(true);
        expect(await failures(agent, 'upload', 'timeout')).toBe(1);
        expect(failedLines()).toEqual([{ step: 'upload', error: refused.json.error.message }]);
        // The failed upload aborted itself: nothing new, listed or unfinished.
        expect(await bucket()).toEqual(before);
        answeredThroughout(answeredBetween(probed, 'backup asked', 'backup failed'));
        // The source member's Snapshot call ended with the backup, as etcd itself counts it.
        await eventually(async () => expect(await openSnapshotCalls(cluster.clientURLs())).toBe(0), { within: 10_000 });

        proxy.throttle(undefined);
        const taken = await post(agent, '/v1/backups', { timeoutSeconds: 60 }, 120_000);
        expect({ status: taken.status, error: taken.json.error }).toEqual({ status: 200 });
        expect((taken.json as BackupResult).verification).toMatchObject({ ok: true });
      } finally {
        await proxy.close();
      }
    },
    patience(STORY_MS),
  );
  it(
    'when the source member freezes in the middle of its snapshot, then the backup fails as a timeout naming it, and a join and a leave right after are not busy',
    async () => {
      // More than the two parts the agent reads at once: the member is still sending when it freezes.
      await largeDatabase();
      const proxy = await TcpProxy.start(s3.directEndpoint);
      try {
        const agent = await agentWith({
          ETCD_AGENT_BACKUP_STORE: s3.location.replace(s3.endpoint, proxy.url),
          ETCD_AGENT_BACKUP_STORE_TIMEOUT_SECONDS: '60',
          ETCD_AGENT_BACKUP_SNAPSHOT_IDLE_SECONDS: String(SNAPSHOT_IDLE_SECONDS),
        });
        const before = await bucket();
        const started = new Map<string, number>();
        for (const m of cluster.members) started.set(m.name, (await snapshotCalls(m.clientURL)).started);
        // A slow store: the snapshot takes many seconds, most of them held back by the store's pace.
        proxy.throttle(SLOW_BYTES_PER_SECOND);
        const call = post(agent, '/v1/backups', { timeoutSeconds: 60 }, 120_000);
        // The source is the member whose etcd counts a new Snapshot call: frozen as soon as it streams.
        const source = await eventually(
          async () => {
            for (const m of cluster.members) if ((await snapshotCalls(m.clientURL)).started > (started.get(m.name) ?? 0)) return m;
            return false;
          },
          { within: 30_000, every: 50 },
        );
        cluster.pause(source.name);
        let refused;
        try {
          refused = await call;
        } finally {
          cluster.resume(source.name);
        }
        expect(failureOf(refused)).toEqual({ status: 504, code: 'timeout', store: undefined, step: 'snapshot' });
        expect(refused.json.error.details.member).toBe(source.name);
        expect(refused.json.error.message).toContain(`member ${source.name} `);
        expect(failedLines()).toEqual([{ step: 'snapshot', error: refused.json.error.message }]);
        expect(await failures(agent, 'snapshot', 'timeout')).toBe(1);
        proxy.throttle(undefined);
        expect(await bucket()).toEqual(before);

        // The lock is free: a membership change goes through (etcd first accepts changes again, as
        // it refuses them for a while after a member was unreachable).
        await etcdAcceptsChanges(cluster);
        const peerURL = await cluster.reservePeerURL('etcd-after-freeze');
        const joined = await post(agent, '/v1/members/join', { name: 'etcd-after-freeze', peerURLs: [peerURL] });
        expect({ status: joined.status, outcome: joined.json.outcome }).toEqual({ status: 202, outcome: 'added' });
        const left = await post(agent, '/v1/members/leave', { name: 'etcd-after-freeze', peerURLs: [peerURL] });
        expect({ status: left.status, outcome: left.json.outcome }).toEqual({ status: 200, outcome: 'removed' });
      } finally {
        await proxy.close();
      }
    },
    patience(STORY_MS),
  );
  it(
    'when the agent is SIGTERMed while a scheduled backup uploads, then it exits 0 within its 5 s stop deadline, the cluster lock is released and no upload is left',
    async () => {
      await largeDatabase();
      const proxy = await TcpProxy.start(s3.directEndpoint);
      try {
        // A slow store: the upload lasts many seconds, long after the stop's budget.
        proxy.throttle(SLOW_BYTES_PER_SECOND);
        const before = await bucket();
        const child = await ChildAgent.start(MAIN_JS, {
          ...s3.env,
          ETCD_AGENT_ENDPOINTS: cluster.clientURLs().join(','),
          ETCD_AGENT_LOCAL_ENDPOINT: cluster.members[0].clientURL,
          ETCD_AGENT_MEMBER_NAME: cluster.members[0].name,
          ETCD_AGENT_BACKUP_STORE: s3.location.replace(s3.endpoint, proxy.url),
          ETCD_AGENT_BACKUP_STORE_TIMEOUT_SECONDS: '60',
          ETCD_AGENT_BACKUP_SCHEDULE: '* * * * *',
          ETCD_AGENT_ETCDUTL: restoreToolPath(),
        });
        try {
          // The schedule's next minute starts a backup; its multipart upload is under way.
          await child.waitFor((l) => l.message === 'backup started', 90_000);
          await eventually(async () => expect((await bucket()).uploads).toHaveLength(before.uploads.length + 1), {
            within: 30_000,
            every: 100,
          });
          const sent = performance.now();
          await child.kill('SIGTERM');
          expect({ code: child.exit?.code, signal: child.exit?.signal }).toEqual({ code: 0, signal: null });
          expect((child.exit?.at ?? Infinity) - sent).toBeLessThan(STOP_DEADLINE_MS);
        } finally {
          await child.kill('SIGKILL');
        }
        // Released by the stop itself, not left to expire with its lease.
        expect(await cluster.etcdctl(['get', '--prefix', '/etcd-lifecycle-agent/lock'])).toBe('');
        expect(await bucket()).toEqual(before);
        expect(child.lines.filter((l) => l.message === 'scheduled backup failed')).toHaveLength(1);
      } finally {
        await proxy.close();
      }
    },
    patience(STORY_MS),
  );
});
