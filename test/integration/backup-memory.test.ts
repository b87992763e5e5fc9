/**
 * The sidecar's memory promise against a real database: a one-member etcd holding more than 1 GiB is
 * backed up by the real agent process (the built bin) into a real S3 server (versitygw), verified by
 * the agent (read back, restored with etcdutl, opened and its keys counted), while the agent and the
 * etcdutl it runs live under the sidecar container's memory limit in deploy/, enforced by the kernel
 * as in a pod (a memory cgroup of their own, memory-limit.ts). The promise holds when the backup is
 * verified and the OOM killer killed nothing. Meanwhile a prober asks the agent for its health, one
 * request after another: the agent's own log, one line per answer in the order it handled things,
 * shows answers inside every step of the backup and of its verification.
 * Nothing here differs by etcd version (the Snapshot RPC and the restore are proven on each in
 * backup.test.ts), so the file runs on the first version only.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { BackupResult, Manifest } from '../../agent/proto/backup';
import { HttpClient } from '../../scripts/bench/http';
import { etcdInstall } from '../../scripts/etcd-version';
import { restoreToolPath } from '../helpers/backup-check';
import { ROOT } from '../helpers/built-agent';
import { ChildAgent, MAIN_JS, type LogLine } from '../helpers/child-agent';
import { startTestCluster, type LocalEtcdCluster } from '../helpers/etcd-cluster';
import { call } from '../helpers/http-call';
import { patience } from '../helpers/eventually';
import { MemoryLimit } from '../helpers/memory-limit';
import { startS3Server, type S3Server } from '../helpers/s3-server';

jest.setTimeout(patience(1_200_000));

const MiB = 1024 * 1024;
/** Large values: 1 MiB each, inside etcd's default request limit of 1.5 MiB. */
const LARGE = { count: 1150, bytes: MiB };
/** Small keys beside them, so the verification's key count walks many leaf pages too. */
const SMALL = { count: 100_000, perTxn: 125 };

/** The sidecar container's memory limit in the StatefulSet we ship: a product promise, read from the manifest itself. */
function sidecarLimitBytes(): number {
  const file = path.join(ROOT, 'deploy/statefulset-with-agent.yaml');
  const docs = parseAllDocuments(fs.readFileSync(file, 'utf8')).map((d) => d.toJS() as Record<string, unknown>);
  const set = docs.find((d) => d?.kind === 'StatefulSet') as
    { spec: { template: { spec: { containers: { name: string; resources?: { limits?: { memory?: string } } }[] } } } } | undefined;
  const limit = set?.spec.template.spec.containers.find((c) => c.name === 'etcd-lifecycle-agent')?.resources?.limits?.memory;
  const mi = /^(\d+)Mi$/.exec(limit ?? '');
  if (mi === null) throw new Error(`${file}: the etcd-lifecycle-agent container's memory limit is ${limit}, not NNNMi`);
  return Number(mi[1]) * MiB;
}

/** The kernel's record of a process's peak resident memory (VmHWM), in bytes. */
function peakResident(pid: number): number {
  const kb = /^VmHWM:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (kb === null) throw new Error(`no VmHWM in /proc/${pid}/status`);
  return Number(kb[1]) * 1024;
}

const b64 = (s: string | Buffer): string => Buffer.from(s).toString('base64');

/** Writes the large values (a few at a time) and the small keys (in transactions); answers the keys written. */
async function fill(clientURL: string): Promise<number> {
  const http = new HttpClient(clientURL, 4);
  try {
    const put = async (key: string, value: string): Promise<void> => {
      const answer = await http.post('/v3/kv/put', { key: b64(key), value }, 60_000);
      if (answer.status !== 200) throw new Error(`put ${key}: HTTP ${answer.status} ${JSON.stringify(answer.body)}`);
    };
    for (let at = 0; at < LARGE.count; at += 4) {
      await Promise.all(
        Array.from({ length: Math.min(4, LARGE.count - at) }, (_, j) => {
          const i = at + j;
          const value = Buffer.alloc(LARGE.bytes, i % 251);
          value.write(`large-${i}`);
          return put(`large/${String(i).padStart(5, '0')}`, value.toString('base64'));
        }),
      );
    }
    for (let at = 0; at < SMALL.count; at += SMALL.perTxn) {
      const success = Array.from({ length: Math.min(SMALL.perTxn, SMALL.count - at) }, (_, j) => ({
        request_put: { key: b64(`small/${String(at + j).padStart(7, '0')}`), value: b64(`v${at + j}`) },
      }));
      const answer = await http.post('/v3/kv/txn', { success }, 60_000);
      if (answer.status !== 200) throw new Error(`txn at ${at}: HTTP ${answer.status} ${JSON.stringify(answer.body)}`);
    }
    return LARGE.count + SMALL.count;
  } finally {
    http.close();
  }
}

/** How many keys etcd serves at `revision` (a count-only range over the whole key space). */
async function keysAt(clientURL: string, revision: number): Promise<number> {
  const http = new HttpClient(clientURL);
  try {
    const answer = await http.post('/v3/kv/range', { key: b64('\0'), range_end: b64('\0'), count_only: true, revision });
    return Number((answer.body as { count?: string }).count ?? 0);
  } finally {
    http.close();
  }
}

/** Asks `url` for /v1/health one request after another, a short pause between, until stopped; answers the statuses. */
function healthProber(url: string): { stop: () => Promise<string[]> } {
  const http = new HttpClient(url);
  const answers: string[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const a = await http.get('/v1/health', 120_000);
        answers.push(`${a.status} ${(a.body as { status?: string }).status ?? ''}`);
      } catch (err) {
        answers.push(`error ${(err as Error).message}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      http.close();
      return answers;
    },
  };
}

describe('a backup of a database over 1 GiB', () => {
  let cluster: LocalEtcdCluster;
  let s3: S3Server;
  let agent: ChildAgent | undefined;
  let memory: MemoryLimit | undefined;

  beforeAll(async () => {
    // Room for the data (4 GiB), and frequent raft snapshots so etcd does not hold a gigabyte of log;
    // no fsync where etcd has the flag (3.5 on): what is measured is the backup, not the disk's writes.
    const noFsync = etcdInstall().minor === '3.4' ? [] : ['--unsafe-no-fsync'];
    cluster = await startTestCluster(1, { extraArgs: ['--quota-backend-bytes=4294967296', '--snapshot-count=100', ...noFsync] });
    s3 = await startS3Server();
  }, patience(120_000));

  afterAll(async () => {
    await agent?.kill('SIGTERM');
    memory?.remove();
    await s3?.close();
    await cluster?.destroy();
  });

  it('when the agent process backs it up into S3 and verifies it under the sidecar memory limit, then nothing is OOM-killed and its health answers go on throughout', async () => {
    const member = cluster.members[0];
    const written = await fill(member.clientURL);
    const limit = sidecarLimitBytes();
    const limited = MemoryLimit.create(`backup-memory-${process.pid}`, limit);
    memory = limited;

    agent = await ChildAgent.start(
      MAIN_JS,
      {
        ...s3.env,
        ETCD_AGENT_ENDPOINTS: member.clientURL,
        ETCD_AGENT_LOCAL_ENDPOINT: member.clientURL,
        ETCD_AGENT_MEMBER_NAME: member.name,
        ETCD_AGENT_BACKUP_STORE: s3.location,
        ETCD_AGENT_ETCDUTL: restoreToolPath(),
        ETCD_AGENT_LOG_LEVEL: 'info',
      },
      undefined,
      (command, argv) => limited.wrap(command, argv),
    );
    const running = agent;
    const prober = healthProber(running.url);
    const http = new HttpClient(running.url);
    let answer;
    try {
      answer = await http.post('/v1/backups', { timeoutSeconds: 60 }, 120_000);
      // A run longer than the call's deadline goes on (202): its end is the verification's log line.
      // An agent that ends first (the OOM killer's work, say) fails the test at once, saying how.
      await Promise.race([
        running.waitFor((l) => l.message === 'backup verified' || l.message === 'backup failed its verification', 900_000),
        running.exited.then(() => {
          throw new Error(
            `the agent ended (${JSON.stringify(running.exit)}) before its backup was verified; OOM kills: ${limited.oomKills()}`,
          );
        }),
      ]);
    } finally {
      http.close();
    }
    const health = await prober.stop();
    const peak = peakResident(running.pid as number);
    const charged = limited.peakBytes();
    const oomKills = limited.oomKills();

    const listed = (await call(running.url, { method: 'GET', path: '/v1/backups' })).json as {
      backups: { state: string; manifest: Manifest }[];
    };
    const manifest = listed.backups[0]?.manifest;
    const lines = running.lines;
    const at = (message: string): number => lines.findIndex((l: LogLine) => l.message === message);
    const steps = [
      'backup started',
      'backup written',
      'backup verification: read back',
      'backup verification: restored',
      'backup verification: read the key space',
      'backup verified',
    ];
    const indices = steps.map(at);
    const answered = steps.slice(1).map((step, n) => ({
      step,
      healthAnswers: lines.slice(indices[n] + 1, indices[n + 1]).filter((l) => l.message === 'request' && l.path === '/v1/health').length,
    }));
    process.stdout.write(
      `backup of ${((manifest?.sizeBytes ?? 0) / MiB).toFixed(0)} MiB under a ${limit / MiB} MiB limit: agent VmHWM ${(peak / MiB).toFixed(1)} MiB, most charged to the limit ${(charged / MiB).toFixed(1)} MiB (page cache included), OOM kills ${oomKills}; health answers per step ${JSON.stringify(answered)}; ${JSON.stringify(manifest?.verification)}\n`,
    );

    // The kernel held both to the limit: it killed nothing, and the agent is the one that started.
    expect(oomKills).toBe(0);
    expect(running.exit).toBeUndefined();
    expect([200, 202]).toContain(answer.status);
    if (answer.status === 200) expect((answer.body as BackupResult).manifest?.name).toBe(manifest?.name);
    expect(listed.backups.map((b) => b.state)).toEqual(['verified']);
    if (manifest?.verification?.ok !== true) throw new Error(`not verified: ${JSON.stringify(manifest?.verification)}`);
    expect(manifest.sizeBytes).toBeGreaterThanOrEqual(1024 * MiB);
    // The keys written, and the agent's own records beside them: as many as etcd serves at that revision.
    expect(manifest.verification.keys).toBeGreaterThanOrEqual(written);
    expect(manifest.verification.keys).toBe(await keysAt(member.clientURL, manifest.verification.revision));

    // Every health answer was healthy, and the agent answered some inside each step of the run.
    expect(new Set(health)).toEqual(new Set(['200 healthy']));
    expect(indices.every((i, n) => i >= 0 && (n === 0 || i > indices[n - 1]))).toBe(true);
    expect(answered.filter((a) => a.healthAnswers === 0)).toEqual([]);
    // And the agent's own peak resident memory, as the kernel records it, stayed under the limit.
    expect(peak).toBeLessThan(limit);
  });
});
