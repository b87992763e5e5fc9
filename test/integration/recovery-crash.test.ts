/**
 * A recovery whose processes die on the way: four pods played by real processes (prepare, etcd under
 * kube-inject's start script, the built agent as each pod's sidecar process), two lost for good. The
 * sidecar of the member recovered from is SIGKILLed at each step of the act, the sidecar of the other
 * survivor at each step of its rejoin, a lost pod's prepare at its steps, each exactly there (crash
 * points, agent/lib/crash-point.ts); each time the process is simply started again, as the kubelet does,
 * and the cluster converges: one start with --force-new-cluster, one cluster id, every member back.
 * First, the re-check right before acting: a majority that was only cut off and comes back between
 * the order and the act calls it off.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Deadline } from '../../agent/lib/deadline';
import { EtcdCluster } from '../../agent/etcd/cluster-client';
import { eventually, patience } from '../helpers/eventually';
import type { LogLine } from '../helpers/child-agent';
import { Answer, call } from '../helpers/http-call';
import { PodSet } from '../helpers/prepare-pods';

jest.setTimeout(patience(180_000));

const ALL = ['etcd-0', 'etcd-1', 'etcd-2', 'etcd-3'];
const LOST = ['etcd-2', 'etcd-3'];
const MIN_LOSS_S = 2;
const AGENT_ENV = { ETCD_AGENT_RECOVERY_MIN_LOSS_SECONDS: String(MIN_LOSS_S) };

let pods: PodSet;
let clusterId = '';

beforeAll(async () => {
  pods = await PodSet.create(4, 4);
});

afterAll(async () => {
  // RECOVERY_TEST_LOGS=<dir>: each sidecar's log lines and each etcd's log, for reading after a failure.
  const logs = process.env.RECOVERY_TEST_LOGS;
  if (logs !== undefined && pods !== undefined) {
    fs.mkdirSync(logs, { recursive: true });
    for (const n of ALL) {
      fs.writeFileSync(
        path.join(logs, `crash-${n}.agent.log`),
        pods
          .agentLines(n)
          .map((l) => JSON.stringify(l))
          .join('\n'),
      );
      fs.writeFileSync(path.join(logs, `crash-${n}.etcd.log`), pods.etcdLog(n));
    }
  }
  await pods?.destroy();
});

function ask(name: string, method: 'GET' | 'POST', urlPath: string, body?: object): Promise<Answer> {
  return call(`http://${pods.pod(name).host}:${pods.ports.agent}`, {
    method,
    path: urlPath,
    body,
    localAddress: pods.pod(name).host,
    timeoutMs: 70_000,
  });
}

const message = (text: string) => (line: LogLine) => line.message === text;
const forceStarts = (name: string): number => pods.etcdStarts(name).filter((a) => a.includes('--force-new-cluster')).length;

async function members(through: string[]): Promise<string[]> {
  const client = new EtcdCluster({ endpoints: through.map((n) => pods.pod(n).clientURL) });
  try {
    const list = await client.listMembers(Deadline.in(3000));
    return list.members.map((m) => `${m.name || m.id}${m.isLearner ? ' (learner)' : ''}`).sort();
  } finally {
    client.close();
  }
}

/**
 * Runs pod `name`'s sidecar with each crash point in turn (agent/lib/crash-point.ts: it SIGKILLs itself
 * exactly there), started again after each death as the kubelet would, then once more without any.
 * Each run but the first must get past the step the one before died at.
 */
async function killAtEachStep(name: string, steps: string[]): Promise<void> {
  for (const step of steps) {
    await pods.startAgent(name, { ...AGENT_ENV, ETCD_AGENT_CRASH_POINTS: step }, { process: true });
    const agent = pods.pod(name).agentProcess;
    let timer: NodeJS.Timeout | undefined;
    const died = await Promise.race([
      agent?.exited.then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), patience(60_000)))),
    ]);
    clearTimeout(timer);
    if (!died) await pods.killAgent(name);
    expect({ step, died }).toEqual({ step, died: true });
  }
  await pods.startAgent(name, AGENT_ENV, { process: true });
}

describe('recovery, crashes', () => {
  it('when four pods start, then they form one cluster', async () => {
    const ids = new Set(Object.values(await pods.startAll(ALL, AGENT_ENV)));
    expect(ids.size).toBe(1);
    clusterId = [...ids][0];
  });

  it('when a majority that was cut off comes back between the order and the act, then the re-check with etcd stopped calls it off and etcd starts as it was', async () => {
    for (const n of LOST) pods.signalEtcd(n, 'SIGSTOP');
    await eventually(
      async () => expect((await ask('etcd-0', 'GET', '/v1/recovery')).json.quorumLostForSeconds).toBeGreaterThan(MIN_LOSS_S),
      { within: 30_000, every: 300 },
    );
    pods.pod('etcd-0').agentProcess?.onLine(message('recovery ordered: this member restarts once with --force-new-cluster'), () => {
      for (const n of LOST) pods.signalEtcd(n, 'SIGCONT');
    });
    const refused = await ask('etcd-0', 'POST', '/v1/recovery', { from: 'etcd-0', clusterId });
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe('unsafe');
    // What the re-check finds depends on how far the majority got once thawed: its quorum answering
    // again, or (before all of it answers) the entries it committed meanwhile, which put etcd-0 behind.
    // Or, once the majority answers again, the re-check's prepare pass finds etcd-0's member listed and
    // decides to start it as is: called off the same way.
    expect(refused.json.error.message).toMatch(
      /^called off(?: at the re-check before acting: (a quorum answers|etcd-\d is more advanced than etcd-0)|: the data directory holds member [0-9a-f]+, which the cluster lists: start as is)/,
    );
    // etcd-0 was stopped for the re-check and starts again as it was: the same member of the same cluster.
    await eventually(async () => expect(pods.etcdStarts('etcd-0')).toHaveLength(2), { within: 10_000, every: 100 });
    expect(forceStarts('etcd-0')).toBe(0);
    const dir = path.dirname(pods.pod('etcd-0').flagsFile);
    for (const f of ['recovery-order.json', 'etcd-hold', 'etcd-flags-once.sh', 'etcd-flags-once.sh.used'])
      expect(fs.existsSync(path.join(dir, f))).toBe(false);
    await eventually(async () => expect(await members(['etcd-0'])).toEqual(ALL), { within: 30_000, every: 250 });
    expect(new Set(Object.values(await pods.clusterIds(ALL)))).toEqual(new Set([clusterId]));
  });

  // The survivor the plan names (the two are at the same commit index, or one is ahead), and the other.
  let from = 'etcd-0';
  let other = 'etcd-1';

  it("when two members are lost for good and the chosen survivor's sidecar is SIGKILLed at each step of the recovery, then each rerun takes it further and it converges: one start with --force-new-cluster", async () => {
    for (const n of LOST) {
      await pods.killAgent(n);
      await pods.stopEtcd(n, true);
      fs.rmSync(pods.pod(n).dataDir, { recursive: true, force: true });
    }
    const plan = await eventually(
      async () => {
        const p = (await ask('etcd-0', 'GET', '/v1/recovery')).json;
        expect(p).toMatchObject({ possible: true, recoverFrom: { name: expect.stringMatching(/^etcd-[01]$/) } });
        return p;
      },
      { within: 30_000, every: 300 },
    );
    from = plan.recoverFrom.name;
    other = from === 'etcd-0' ? 'etcd-1' : 'etcd-0';
    // The other survivor's sidecar is stopped meanwhile: its rejoin is the next story.
    await pods.stopAgent(other);
    await eventually(async () => expect((await ask(from, 'GET', '/v1/recovery')).json.quorumLostForSeconds).toBeGreaterThan(MIN_LOSS_S), {
      within: 30_000,
      every: 300,
    });
    await pods.stopAgent(from);
    await pods.startAgent(from, { ...AGENT_ENV, ETCD_AGENT_CRASH_POINTS: 'recovery-ordered' }, { process: true });
    // A restarted agent's clock starts again: it must see the loss for the minimum itself.
    await eventually(async () => expect((await ask(from, 'GET', '/v1/recovery')).json.quorumLostForSeconds).toBeGreaterThan(MIN_LOSS_S), {
      within: 30_000,
      every: 300,
    });
    const first = await ask(from, 'POST', '/v1/recovery', { from, clusterId }).catch((err: unknown) => err);
    // The agent died while answering: no HTTP answer.
    expect(first).not.toHaveProperty('status');
    expect(String(first)).toMatch(/socket hang up|ECONNRESET|ECONNREFUSED/);
    await pods.pod(from).agentProcess?.exited;
    // Each rerun resumes the order it finds beside the flags file.
    await killAtEachStep(from, [
      'recovery-hold-asked',
      'recovery-held',
      'recovery-once-written',
      'recovery-started',
      'recovery-released',
      'recovery-recorded',
      'recovery-done',
    ]);
    // The restarted agent answers what was done (once its first look has reached etcd: before that it
    // answers a retryable refusal, as any call made while it cannot count the quorum).
    await eventually(
      async () => {
        const replay = await ask(from, 'POST', '/v1/recovery', { from, clusterId });
        expect(replay.json).toMatchObject({ outcome: 'already-recovered', record: { clusterId, from: { name: from } } });
      },
      { within: 15_000, every: 500 },
    );
    expect(forceStarts(from)).toBe(1);
    expect(await members([from])).toEqual([from]);
    expect(new Set(Object.values(await pods.clusterIds([from])))).toEqual(new Set([clusterId]));
  });

  it("when the other survivor's sidecar is SIGKILLed at each step of its rejoin, then each rerun takes it further and it is a voter again, its old data moved aside once", async () => {
    await killAtEachStep(other, ['rejoin-hold-asked', 'prepare-moved-aside', 'prepare-joined', 'prepare-flags-written', 'rejoin-released']);
    await eventually(async () => expect(await members([from])).toEqual(['etcd-0', 'etcd-1']), { within: 60_000, every: 250 });
    const aside = fs.readdirSync(path.dirname(pods.pod(other).dataDir)).filter((f) => f.includes('.removed-'));
    expect(aside).toHaveLength(1);
    expect(forceStarts(other)).toBe(0);
  });

  it('when the lost pods come back and prepare is SIGKILLed at its join and after deciding, then each rerun converges and the cluster is four again, one cluster id', async () => {
    for (const crashAt of ['prepare-joined', 'prepare-flags-written']) {
      const killed = await pods.prepare('etcd-2', { waitSeconds: 60, crashAt });
      expect({ crashAt, signal: killed.signal }).toEqual({ crashAt, signal: 'SIGKILL' });
    }
    await pods.prepareUntilReady('etcd-2', { waitSeconds: 60, attempts: 3 });
    pods.pod('etcd-2').restartOnExit = true;
    pods.startEtcd('etcd-2');
    await pods.startAgent('etcd-2', AGENT_ENV, { process: true });
    await pods.prepareUntilReady('etcd-3', { waitSeconds: 60, attempts: 3 });
    pods.pod('etcd-3').restartOnExit = true;
    pods.startEtcd('etcd-3');
    await pods.startAgent('etcd-3', AGENT_ENV, { process: true });
    await eventually(async () => expect(await members(['etcd-0', 'etcd-1'])).toEqual(ALL), { within: 90_000, every: 250 });
    expect(new Set(Object.values(await pods.clusterIds(ALL)))).toEqual(new Set([clusterId]));
    expect(ALL.map(forceStarts)).toEqual(ALL.map((n) => (n === from ? 1 : 0)));
  });
});
