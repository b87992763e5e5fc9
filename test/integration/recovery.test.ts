/**
 * When the quorum is lost for good: five pods played by real processes (test/helpers/prepare-pods.ts:
 * prepare as the init container, etcd through kube-inject's start script, a real sidecar agent),
 * three of them lost with their data, the two survivors at different indexes (a writer ran while one
 * was frozen). The plan names the more advanced survivor; the gates refuse, changing nothing, a call
 * while the quorum is only briefly lost, while a majority that was cut off has its quorum back, a
 * call naming the less advanced survivor, a wrong cluster id and a call to the wrong agent; the
 * recovery keeps every write the old quorum acknowledged, a replay is a no-op, and the cluster grows
 * back to five through prepare and the agents alone, with one cluster id throughout.
 */
import fs from 'node:fs';
import path from 'node:path';
import { delay, Deadline } from '../../agent/deadline';
import { EtcdCluster } from '../../agent/etcd/cluster-client';
import { eventually } from '../helpers/etcd-cluster';
import { Answer, call } from '../helpers/http-call';
import { PodSet } from '../helpers/prepare-pods';

jest.setTimeout(240_000);

const ALL = ['etcd-0', 'etcd-1', 'etcd-2', 'etcd-3', 'etcd-4'];
const LOST = ['etcd-2', 'etcd-3', 'etcd-4'];
/** ETCD_AGENT_RECOVERY_MIN_LOSS_SECONDS in this test. */
const MIN_LOSS_S = 4;
const AGENT_ENV = { ETCD_AGENT_RECOVERY_MIN_LOSS_SECONDS: String(MIN_LOSS_S) };

let pods: PodSet;
let clusterId = '';
const figures: Record<string, unknown> = {};

beforeAll(async () => {
  pods = await PodSet.create(5, 5);
});

afterAll(async () => {
  console.log(`recovery figures (etcd ${process.env.ETCD_VERSION ?? '3.6'}): ${JSON.stringify(figures)}`);
  await pods?.destroy();
});

function agentUrl(name: string): string {
  return `http://${pods.pod(name).host}:${pods.ports.agent}`;
}

function ask(name: string, method: 'GET' | 'POST', urlPath: string, body?: object): Promise<Answer> {
  return call(agentUrl(name), { method, path: urlPath, body, localAddress: pods.pod(name).host, timeoutMs: 70_000 });
}

async function startPod(name: string): Promise<void> {
  pods.pod(name).restartOnExit = true;
  pods.startEtcd(name);
  pods.pod(name).restartOnExit = true;
  await pods.startAgent(name, AGENT_ENV);
}

async function clusterIdsOf(names: string[]): Promise<Set<string>> {
  return new Set(Object.values(await pods.clusterIds(names)));
}

async function voters(through: string[]): Promise<string[]> {
  const client = new EtcdCluster({ endpoints: through.map((n) => pods.pod(n).clientURL) });
  try {
    const list = await client.listMembers(Deadline.in(3000));
    return list.members.map((m) => `${m.name}${m.isLearner ? ' (learner)' : ''}${m.started ? '' : ' (unstarted)'}`).sort();
  } finally {
    client.close();
  }
}

/** Nothing changed on etcd-0's side: no order, no hold, no one-shot flags, the same etcd process. */
function expectUntouched(pid: number | undefined): void {
  const dir = path.dirname(pods.pod('etcd-0').flagsFile);
  for (const f of ['recovery-order.json', 'etcd-hold', 'etcd-flags-once.sh', 'etcd-flags-once.sh.used']) expect(fs.existsSync(path.join(dir, f))).toBe(false);
  expect(pods.etcdPid('etcd-0')).toBe(pid);
}

describe('recovery', () => {
  const acked: string[] = [];

  it('when five pods start, then they form one cluster', async () => {
    const runs = await Promise.all(ALL.map((n) => pods.prepare(n)));
    for (const [i, run] of runs.entries()) {
      expect(run.code).toBe(0);
      pods.pod(ALL[i]).restartOnExit = true;
      pods.startEtcd(ALL[i]);
    }
    await Promise.all(ALL.map((n) => eventually(async () => expect(await pods.healthy(n)).toBe(true), 30_000, 200)));
    for (const n of ALL) await pods.startAgent(n, AGENT_ENV);
    const ids = await clusterIdsOf(ALL);
    expect(ids.size).toBe(1);
    clusterId = [...ids][0];
  });

  it('when a majority is cut off longer than the minimum and then has its quorum back, then a recovery is refused and nothing changes', async () => {
    const pid = pods.etcdPid('etcd-0');
    for (const n of LOST) pods.signalEtcd(n, 'SIGSTOP');
    // Keep asking, as probes and scrapes do, so etcd-0's agent sees the loss.
    await eventually(async () => {
      const plan = (await ask('etcd-0', 'GET', '/v1/recovery')).json;
      expect(plan.quorumLostForSeconds).toBeGreaterThan(MIN_LOSS_S);
    }, 30_000, 500);
    for (const n of LOST) pods.signalEtcd(n, 'SIGCONT');
    await eventually(async () => expect((await ask('etcd-0', 'GET', '/v1/health')).json.quorum.hasQuorum).toBe(true), 15_000, 200);
    const refused = await ask('etcd-0', 'POST', '/v1/recovery', { from: 'etcd-0', clusterId });
    expect(refused.status).toBe(409);
    expect(refused.json.error).toMatchObject({ code: 'unsafe', details: { quorum: { voters: 5 } } });
    expect(refused.json.error.message).toContain('a quorum answers');
    expectUntouched(pid);
  });

  it('when a writer runs while etcd-1 is frozen and three members are then lost with their data, then the survivors are at different indexes', async () => {
    const client = new EtcdCluster({ endpoints: ['etcd-0', 'etcd-2', 'etcd-3', 'etcd-4'].map((n) => pods.pod(n).clientURL) });
    const put = async (i: number): Promise<void> => {
      const key = `w/${String(i).padStart(5, '0')}`;
      // A frozen leader costs an election: a put that is not acknowledged is tried again (the same key and value).
      for (let attempt = 0; ; attempt++) {
        try {
          await client.raw.put(key).value(String(i)).options({ deadline: new Date(Date.now() + 2000) });
          break;
        } catch (err) {
          if (attempt >= 10) throw err;
        }
      }
      acked.push(key);
    };
    for (let i = 0; i < 50; i++) await put(i);
    pods.signalEtcd('etcd-1', 'SIGSTOP');
    for (let i = 50; i < 250; i++) await put(i);
    // Every acknowledged write reached etcd-0 (it is applied there) before the others are lost.
    const leaderCommit = Math.max(...(await Promise.all(LOST.map(async (n) => (await client.memberStatus(pods.pod(n).clientURL, 1000)).raftIndex))));
    await eventually(async () => expect((await client.memberStatus(pods.pod('etcd-0').clientURL, 1000)).raftAppliedIndex).toBeGreaterThanOrEqual(leaderCommit), 10_000, 50);
    for (const n of LOST) {
      await pods.stopAgent(n);
      await pods.stopEtcd(n, true);
      fs.rmSync(pods.pod(n).dataDir, { recursive: true, force: true });
    }
    // Thawed only once etcd-0 knows no leader: a leader that has not yet stepped down would bring it up to date.
    await eventually(async () => expect((await client.memberStatus(pods.pod('etcd-0').clientURL, 1000)).leaderId).toBe('0'), 10_000, 100);
    client.close();
    pods.signalEtcd('etcd-1', 'SIGCONT');
    figures.ackedBeforeLoss = acked.length;
  });

  it('when the quorum has been lost only briefly, then a recovery is refused with its figures and nothing changes', async () => {
    const pid = pods.etcdPid('etcd-0');
    const refused = await eventually(async () => {
      const answer = await ask('etcd-0', 'POST', '/v1/recovery', { from: 'etcd-0', clusterId });
      expect(answer.json.error?.details?.minLossSeconds).toBe(MIN_LOSS_S);
      return answer;
    }, 10_000, 200);
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe('unsafe');
    expect(refused.json.error.details.quorumLostForSeconds).toBeLessThan(MIN_LOSS_S);
    expectUntouched(pid);
  });

  it('when the loss has lasted, then the plan names the more advanced survivor and says what the other would lose', async () => {
    const plan = await eventually(async () => {
      const p = (await ask('etcd-1', 'GET', '/v1/recovery')).json;
      expect({ possible: p.possible, reason: p.reason }).toMatchObject({ possible: true });
      expect(p.quorumLostForSeconds).toBeGreaterThan(MIN_LOSS_S + 0.5);
      return p;
    }, 30_000, 500);
    // etcd-0's agent has seen the loss as long.
    await eventually(async () => expect((await ask('etcd-0', 'GET', '/v1/recovery')).json.quorumLostForSeconds).toBeGreaterThan(MIN_LOSS_S + 0.5), 15_000, 500);
    expect(plan).toMatchObject({ needed: true, clusterId, recoverFrom: { name: 'etcd-0' }, call: { agent: agentUrl('etcd-0'), body: { from: 'etcd-0', clusterId } } });
    expect([...plan.drops.lost].sort()).toEqual(LOST);
    expect(plan.drops.membersRemoved.sort()).toEqual(['etcd-1', ...LOST]);
    expect(plan.drops.behind).toEqual([expect.objectContaining({ name: 'etcd-1' })]);
    expect(plan.drops.behind[0].entriesBehind).toBeGreaterThan(0);
    const byName = Object.fromEntries(plan.members.map((m: { name: string }) => [m.name, m]));
    expect(byName['etcd-0']).toMatchObject({ source: 'etcd', clusterId });
    expect(byName['etcd-2']).toMatchObject({ source: 'none' });
    figures.plan = { from: plan.recoverFrom, behind: plan.drops.behind };
  });

  it('when the call names the less advanced survivor, a wrong cluster id, or goes to another agent, then it is refused and nothing changes', async () => {
    const pid = pods.etcdPid('etcd-0');
    const behind = await ask('etcd-1', 'POST', '/v1/recovery', { from: 'etcd-1', clusterId });
    expect(behind.json).toMatchObject({ error: { code: "unsafe" } });
    expect(behind.json.error).toMatchObject({ code: 'unsafe', details: { mostAdvanced: { name: 'etcd-0' } } });
    expect(behind.json.error.details.entriesDropped).toBeGreaterThan(0);
    const wrongId = await ask('etcd-0', 'POST', '/v1/recovery', { from: 'etcd-0', clusterId: '1234abcd' });
    expect(wrongId.status).toBe(409);
    expect(wrongId.json.error).toMatchObject({ code: 'conflict', details: { clusterId, asked: '1234abcd' } });
    const wrongAgent = await ask('etcd-1', 'POST', '/v1/recovery', { from: 'etcd-0', clusterId });
    expect(wrongAgent.status).toBe(400);
    expectUntouched(pid);
    expect(fs.existsSync(path.join(path.dirname(pods.pod('etcd-1').flagsFile), 'recovery-order.json'))).toBe(false);
  });

  it('when the call names the most advanced survivor, then it recovers, keeps every acknowledged write, and a replay is a no-op', async () => {
    const started = Date.now();
    const answer = await ask('etcd-0', 'POST', '/v1/recovery', { from: 'etcd-0', clusterId, timeoutSeconds: 60 });
    expect(answer.json).toMatchObject({ outcome: "recovered" });
    expect(answer.json).toMatchObject({ outcome: 'recovered', complete: true, record: { clusterId, from: { name: 'etcd-0' } } });
    const client = new EtcdCluster({ endpoints: [pods.pod('etcd-0').clientURL] });
    await client.raw.put('after-recovery').value('1');
    figures.callToWritableMs = Date.now() - started;
    figures.writableAfterMs = answer.json.writableAfterMs;
    const read = await client.raw.getAll().prefix('w/').strings();
    figures.foundAfter = acked.filter((k) => read[k] !== undefined).length;
    expect(acked.filter((k) => read[k] === undefined)).toEqual([]);
    client.close();
    expect(await clusterIdsOf(['etcd-0'])).toEqual(new Set([clusterId]));

    const replay = await ask('etcd-0', 'POST', '/v1/recovery', { from: 'etcd-0', clusterId });
    expect(replay.status).toBe(200);
    expect(replay.json).toMatchObject({ outcome: 'already-recovered', record: { id: answer.json.record.id } });
    // The one-shot flag was used once and is gone.
    const dir = path.dirname(pods.pod('etcd-0').flagsFile);
    expect(fs.existsSync(path.join(dir, 'etcd-flags-once.sh'))).toBe(false);
    expect(fs.existsSync(path.join(dir, 'etcd-flags-once.sh.used'))).toBe(true);
  });

  it('when the lost pods come back without data, then the cluster grows back to five through prepare and the agents, with one cluster id', async () => {
    const started = Date.now();
    // etcd-1 rejoins by itself: its agent holds its etcd, moves its data aside and joins it as a learner.
    await eventually(async () => expect(await voters(['etcd-0'])).toEqual(['etcd-0', 'etcd-1']), 60_000, 500);
    figures.etcd1RejoinedMs = Date.now() - started;
    const aside = fs.readdirSync(path.dirname(pods.pod('etcd-1').dataDir)).filter((f) => f.includes('.removed-'));
    expect(aside).toHaveLength(1);
    await Promise.all(
      LOST.map(async (n) => {
        await pods.prepareUntilReady(n, { waitSeconds: 60, attempts: 5 });
        await startPod(n);
      }),
    );
    await eventually(async () => expect(await voters(['etcd-0', 'etcd-1'])).toEqual(ALL), 120_000, 500);
    figures.backToFiveMs = Date.now() - started;
    expect(await clusterIdsOf(ALL)).toEqual(new Set([clusterId]));
    const client = new EtcdCluster({ endpoints: ALL.map((n) => pods.pod(n).clientURL) });
    const read = await client.raw.getAll().prefix('w/').strings();
    expect(acked.filter((k) => read[k] === undefined)).toEqual([]);
    client.close();
    await delay(0);
  });
});
