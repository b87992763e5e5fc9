/**
 * Backups into a real S3 server (versitygw) when the store fails: down then back, refusing the
 * credentials, without the bucket, silent, and the agent SIGKILLed in the middle of an upload. Each
 * failure is answered with the store's reason, counted and logged, and leaves nothing listed that is
 * not whole; the next backup succeeds; membership reads and health go on unaffected throughout.
 */
import { ListMultipartUploadsCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import type { RunningAgent } from '../../agent/agent';
import type { BackupResult } from '../../agent/proto/backup';
import { HttpClient } from '../../scripts/bench/http';
import { restoreToolPath } from '../helpers/backup-check';
import { createLogger } from '../../agent/observability/logger';
import { ChildAgent, MAIN_JS } from '../helpers/child-agent';
import { captureLogs } from '../helpers/log-capture';
import { startTestCluster, type LocalEtcdCluster } from '../helpers/etcd-cluster';
import { eventually } from '../helpers/eventually';
import { get, post, startMemberAgent } from '../helpers/membership';
import { startS3Server, type S3Server } from '../helpers/s3-server';
import { TcpProxy } from '../helpers/tcp-proxy';

const STORY_MS = 180_000;
/** A store request's own deadline in these tests (ETCD_AGENT_BACKUP_STORE_TIMEOUT_SECONDS). */
const STORE_TIMEOUT_SECONDS = 3;

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

  /** Health and membership answer as before, whatever the store does. */
  const unaffected = async (agent: RunningAgent): Promise<void> => {
    expect((await get(agent, '/v1/members')).status).toBe(200);
    const health = await get(agent, '/v1/health');
    expect({ status: health.status, health: health.json.status }).toEqual({ status: 200, health: 'healthy' });
  };

  /** The `backup failed` log lines so far, as step and message. */
  const failedLines = (): { step: unknown; error: unknown }[] =>
    logs
      .text()
      .split('\n')
      .filter((l) => l.includes('"backup failed"'))
      .map((l) => JSON.parse(l) as { step: unknown; error: unknown })
      .map(({ step, error }) => ({ step, error }));

  const failures = async (agent: RunningAgent, step: string, reason: string): Promise<number> =>
    (await agent.metrics.backup.failures.get()).values.find((v) => v.labels.step === step && v.labels.reason === reason)?.value ?? 0;

  beforeAll(async () => {
    cluster = await startTestCluster(3);
    s3 = await startS3Server();
  }, 60_000);

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
      expect(taken.status).toBe(200);
      expect((taken.json as BackupResult).verification).toMatchObject({ ok: true });
      expect((await get(agent, '/v1/backups')).json.backups).toHaveLength(1);
    },
    STORY_MS,
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
    'when %s, then the backup fails with that reason, not retryable, and names no secret',
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
    },
    STORY_MS,
  );

  it(
    'when the store goes silent in the middle, then the backup fails as a timeout and the next one, once it answers, succeeds',
    async () => {
      const proxy = await TcpProxy.start(s3.directEndpoint);
      try {
        const agent = await agentWith({ ETCD_AGENT_BACKUP_STORE: s3.location.replace(s3.endpoint, proxy.url) });
        const before = (await get(agent, '/v1/backups')).json.backups as unknown[];
        proxy.freeze();
        const refused = await post(agent, '/v1/backups', {});
        expect(failureOf(refused)).toMatchObject({ status: 504, code: 'timeout', store: 'timeout' });
        expect(await failures(agent, String(refused.json.error.details?.step), 'timeout')).toBe(1);
        expect(failedLines()).toEqual([{ step: refused.json.error.details?.step, error: refused.json.error.message }]);
        await unaffected(agent);
        proxy.thaw();
        expect((await get(agent, '/v1/backups')).json.backups).toEqual(before);
        const taken = await post(agent, '/v1/backups', {});
        expect(taken.status).toBe(200);
        expect((await get(agent, '/v1/backups')).json.backups).toHaveLength(before.length + 1);
      } finally {
        await proxy.close();
      }
    },
    STORY_MS,
  );

  it(
    'when the agent is SIGKILLed in the middle of an upload, then no backup is listed, and the next run aborts the upload it left and succeeds',
    async () => {
      // More than the crash point's 16 MiB: 240 values of 100 kB.
      const http = new HttpClient(cluster.members[0].clientURL);
      try {
        const value = Buffer.alloc(100_000, 'x').toString('base64');
        for (let i = 0; i < 240; i++) {
          const put = await http.post('/v3/kv/put', { key: Buffer.from(`big/${i}`).toString('base64'), value }, 10_000);
          expect(put.status).toBe(200);
        }
      } finally {
        http.close();
      }
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
      expect(taken.verification).toMatchObject({ ok: true });
      expect((await bucket()).uploads).toEqual([]);
      await unaffected(again);
    },
    STORY_MS,
  );
});
