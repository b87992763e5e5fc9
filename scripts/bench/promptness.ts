/**
 * Promptness, where it is the feature: the figures the integration tests leave to the bench (they
 * judge the outcome and the order of events; how soon is a latency). Each against a baseline
 * measured on the same cluster in the same run, in alternating rounds where one can be had:
 *
 * - health with the member beside the agent frozen (SIGSTOP): `/v1/health` at a probe rate (10
 *   req/s, calls not waiting for each other), p99, against one Status call to the frozen member
 *   (what each caller would wait without a shared observation refreshed ahead of expiry), and, for
 *   context, against the same p99 with every member up;
 * - no quorum: a leave answered `unavailable` with 2 of 3 voters killed, p50, against what a caller
 *   without the agent learns from etcd in the same state: a linearizable read on the survivor, until
 *   etcd gives up on it (its request timeout); the same leave with the quorum present, for context;
 * - a leader's leave: the longest stretch without an acknowledged write while the agent removes
 *   the leader (it hands leadership over first), against removing the leader outright (`etcdctl
 *   member remove`, the others elect once their election timeout passes) and, for context, against
 *   etcd moving leadership alone (`etcdctl move-leader`), rounds alternating; the writer writes
 *   through the members that stay, so the stretch is raft's, not a client's failover;
 * - a dead member's leave: the agent of a member that was SIGKILLed removes it, p50, against the same
 *   agent removing a learner that never started (a removal with nothing to wait for).
 *
 * A 3-member cluster of its own: the leader's leave removes members and adds them back on new ports.
 */
import { Etcd3 } from 'etcd3';
import type { LocalEtcdCluster } from '../local-cluster';
import { AgentProcess } from './agent-process';
import type { BenchContext } from './context';
import { pick } from './context';
import { HttpAnswer, HttpClient } from './http';
import { median, p99, round, sleep, summarize } from './stats';

const SECTION = 'promptness';

/** Runs every measurement of the section on `cluster` (3 members, every one running). */
export async function measurePromptness(ctx: BenchContext, cluster: LocalEtcdCluster): Promise<void> {
  await measureFrozenHealth(ctx, cluster);
  await measureNoQuorum(ctx, cluster);
  await measureLeaderLeave(ctx, cluster);
  await measureDeadMemberLeave(ctx, cluster);
}

/** An agent process beside member `name`, with `endpoints` (default: every member). */
function agentBeside(
  ctx: BenchContext,
  cluster: LocalEtcdCluster,
  name: string,
  label: string,
  endpoints?: string[],
  env?: Record<string, string>,
): Promise<AgentProcess> {
  return AgentProcess.start({
    endpoints: endpoints ?? cluster.clientURLs(),
    localEndpoint: cluster.member(name).clientURL,
    memberName: name,
    workDir: ctx.workDir,
    label,
    node: ctx.node,
    env,
  });
}

/** Asks `/v1/health` every 100 ms until its status is `status` (from an observation begun at or after `since`). */
async function untilStatus(agent: AgentProcess, status: string, since = 0, timeoutMs = 30_000): Promise<void> {
  const until = performance.now() + timeoutMs;
  for (;;) {
    const answer = await agent.http.get('/v1/health').catch(() => undefined);
    const body = answer?.body as { status?: string; observedAt?: string } | undefined;
    if (body?.status === status && Date.parse(body.observedAt ?? '') >= since) return;
    if (performance.now() > until) throw new Error(`the agent never answered ${status}: ${JSON.stringify(body).slice(0, 300)}`);
    await sleep(100);
  }
}

/** `count` calls of `/v1/health`, one sent every 100 ms without waiting for the others; their round trips. */
async function probeRate(url: string, count: number): Promise<number[]> {
  const client = new HttpClient(url, 16);
  const calls: Array<Promise<number>> = [];
  try {
    for (let i = 0; i < count; i++) {
      calls.push(client.get('/v1/health', 10_000).then((a) => a.ms));
      await sleep(100);
    }
    return await Promise.all(calls);
  } finally {
    client.close();
  }
}

async function measureFrozenHealth(ctx: BenchContext, cluster: LocalEtcdCluster): Promise<void> {
  const own = cluster.members[0].name;
  // Configured as deploy/ does by default: its own member is its only endpoint.
  const agent = await agentBeside(ctx, cluster, own, 'promptness-frozen', [cluster.member(own).clientURL]);
  const calls = pick(ctx, 100, 30);
  const up: number[] = [];
  const frozen: number[] = [];
  const statusCall: number[] = [];
  try {
    for (let r = 0; r < pick(ctx, 3, 1); r++) {
      await untilStatus(agent, 'healthy');
      up.push(...(await probeRate(agent.url, calls)));
      cluster.pause(own);
      const pausedAt = Date.now();
      try {
        await untilStatus(agent, 'degraded', pausedAt);
        frozen.push(...(await probeRate(agent.url, calls)));
        // What a caller would wait without the shared observation: one Status call to the frozen member,
        // cut at the agent's status timeout (ETCD_AGENT_STATUS_TIMEOUT_MS, 500 ms).
        const direct = new HttpClient(cluster.member(own).clientURL);
        const t0 = performance.now();
        await direct.post('/v3/maintenance/status', {}, 500).catch(() => undefined);
        statusCall.push(performance.now() - t0);
        direct.close();
      } finally {
        cluster.resume(own);
      }
      ctx.log(`promptness: frozen own member, round ${r + 1}: p99 ${round(p99(frozen), 1)} ms frozen, ${round(p99(up), 1)} ms all up`);
    }
  } finally {
    await agent.stop();
  }
  ctx.rows.push(
    {
      section: SECTION,
      figure: `/v1/health p99 at 10 req/s, own member frozen (n=${frozen.length})`,
      value: p99(frozen),
      unit: 'ms',
      baseline: { name: 'one Status call to the frozen member (an unshared observation)', value: median(statusCall), unit: 'ms' },
      ratio: { value: p99(frozen) / median(statusCall), of: 'agent ÷ Status call' },
      target: '≤ 0.1×',
      pass: p99(frozen) / median(statusCall) <= 0.1,
      detail: { frozen: summarize(frozen), up: summarize(up), statusCall: summarize(statusCall) },
    },
    {
      section: SECTION,
      figure: 'context: the same p99, own member frozen',
      value: p99(frozen),
      unit: 'ms',
      baseline: { name: 'the same calls, every member up, p99', value: p99(up), unit: 'ms' },
      ratio: { value: p99(frozen) / p99(up), of: 'frozen ÷ up' },
    },
  );
}

async function measureNoQuorum(ctx: BenchContext, cluster: LocalEtcdCluster): Promise<void> {
  const names = cluster.members.map((m) => m.name);
  const agent = await agentBeside(ctx, cluster, names[0], 'promptness-no-quorum');
  const calls = pick(ctx, 20, 5);
  const withQuorum: number[] = [];
  const without: number[] = [];
  const etcdRead: number[] = [];
  const leave = (): Promise<HttpAnswer> => agent.http.post('/v1/members/leave', { name: 'absent-member', timeoutSeconds: 30 });
  try {
    for (let r = 0; r < pick(ctx, 3, 1); r++) {
      await untilStatus(agent, 'healthy');
      for (let i = 0; i < calls; i++) withQuorum.push(expectOutcome(await leave(), 200, 'already-absent').ms);
      const killed = [names[1], names[2]];
      await Promise.all(killed.map((n) => cluster.kill(n)));
      const killedAt = Date.now();
      try {
        await untilStatus(agent, 'unavailable', killedAt);
        for (let i = 0; i < calls; i++) without.push(expectError(await leave(), 503, 'unavailable').ms);
        const survivor = new HttpClient(cluster.member(names[0]).clientURL);
        const read = await survivor
          .post('/v3/kv/range', { key: Buffer.from('promptness').toString('base64') }, 60_000)
          .catch(() => undefined);
        survivor.close();
        if (read !== undefined) etcdRead.push(read.ms);
      } finally {
        await Promise.all(killed.map((n) => cluster.restart(n)));
      }
      ctx.log(
        `promptness: no quorum, round ${r + 1}: leave p50 ${round(median(without), 1)} ms, with quorum ${round(median(withQuorum), 1)} ms`,
      );
    }
    await untilStatus(agent, 'healthy');
  } finally {
    await agent.stop();
  }
  ctx.rows.push(
    {
      section: SECTION,
      figure: `leave without a quorum → 503 unavailable, p50 (n=${without.length}, deadline 30 s)`,
      value: median(without),
      unit: 'ms',
      baseline: { name: "etcd's own linearizable read on the survivor, until it fails, p50", value: median(etcdRead), unit: 'ms' },
      ratio: { value: median(without) / median(etcdRead), of: 'agent ÷ etcd' },
      target: '≤ 0.1×',
      pass: median(without) / median(etcdRead) <= 0.1,
      detail: { without: summarize(without), etcdRead: summarize(etcdRead), withQuorum: summarize(withQuorum) },
    },
    {
      section: SECTION,
      figure: 'context: the same leave without a quorum, p50',
      value: median(without),
      unit: 'ms',
      baseline: { name: 'the same leave with the quorum present (already-absent), p50', value: median(withQuorum), unit: 'ms' },
      ratio: { value: median(without) / median(withQuorum), of: 'no quorum ÷ quorum' },
    },
  );
}

/** A writer through every member: one put at a time, each acknowledgement's time kept. */
class Writer {
  readonly acks: number[] = [];
  private stopped = false;
  private readonly client: Etcd3;
  private readonly loop: Promise<void>;

  constructor(endpoints: string[]) {
    this.client = new Etcd3({ hosts: endpoints });
    this.loop = this.run();
  }

  /** The longest stretch between two acknowledgements (or from `from`/to `to`) inside [from, to]. */
  longestGap(from: number, to: number): number {
    const marks = [from, ...this.acks.filter((t) => t > from && t < to), to];
    return Math.max(...marks.slice(1).map((t, i) => t - marks[i]));
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.loop;
    this.client.close();
  }

  private async run(): Promise<void> {
    for (let i = 0; !this.stopped; i++) {
      try {
        await this.client
          .put(`promptness/${i % 100}`)
          .value(String(i))
          .options({ deadline: new Date(Date.now() + 2000) });
        this.acks.push(performance.now());
      } catch {
        // counted as the gap it makes
      }
    }
  }
}

/** The current leader's name, from etcd's own member list and Status. */
async function leaderName(cluster: LocalEtcdCluster): Promise<string> {
  const out = await cluster.etcdctl(['endpoint', 'status', '-w', 'json']);
  const leader = /"leader":(\d+)/.exec(out)?.[1];
  const id = leader === undefined ? undefined : BigInt(leader).toString(16);
  const found = (await cluster.listMembers()).find((m) => m.id === id);
  if (found === undefined) throw new Error(`no leader in ${out.slice(0, 300)}`);
  return found.name;
}

async function measureLeaderLeave(ctx: BenchContext, cluster: LocalEtcdCluster): Promise<void> {
  const gaps: Record<'agent' | 'move' | 'remove', number[]> = { agent: [], move: [], remove: [] };
  // The agent of a pod that is never the one leaving: its own member stays.
  const keeper = cluster.members[0].name;
  const agent = await agentBeside(ctx, cluster, keeper, 'promptness-leave');
  try {
    for (let r = 0; r < pick(ctx, 3, 1); r++) {
      const kinds = ['agent', 'move', 'remove'] as const;
      for (const kind of [...kinds.slice(r % 3), ...kinds.slice(0, r % 3)]) {
        // Leadership on a member other than the keeper, so the leave removes a leader not beside the agent.
        let leader = await leaderName(cluster);
        if (leader === keeper) {
          const to = (await cluster.listMembers()).find((m) => m.name !== keeper);
          await cluster.etcdctl(['move-leader', String(to?.id)], [cluster.member(keeper).clientURL]);
          leader = await leaderName(cluster);
        }
        const leaderId = (await cluster.listMembers()).find((m) => m.name === leader)?.id as string;
        // The last round's rejoin reconnected a peer: etcd refuses changes for 5 s after that.
        await untilChangesAccepted(cluster);
        const writer = new Writer(cluster.members.filter((m) => m.name !== leader && m.state === 'running').map((m) => m.clientURL));
        try {
          await sleep(500);
          const from = performance.now();
          if (kind === 'agent') {
            expectOutcome(await agent.http.post('/v1/members/leave', { name: leader, timeoutSeconds: 30 }), 200, 'removed');
          } else if (kind === 'move') {
            const to = (await cluster.listMembers()).find((m) => m.name !== leader);
            await cluster.etcdctl(['move-leader', String(to?.id)], [cluster.member(leader).clientURL]);
          } else {
            await cluster.etcdctl(['member', 'remove', leaderId], [cluster.member(keeper).clientURL]);
          }
          // The writes go on a moment after the change, so a stretch that ends only then is counted.
          await sleep(1000);
          gaps[kind].push(writer.longestGap(from, performance.now()));
        } finally {
          await writer.stop();
        }
        if (kind !== 'move') {
          await cluster.kill(leader);
          await rejoin(cluster, agent, leader);
        }
      }
      const last = (k: keyof typeof gaps): number => round(gaps[k][gaps[k].length - 1], 0);
      ctx.log(
        `promptness: leader leave, round ${r + 1}: longest write gap, agent ${last('agent')} ms, move-leader ${last('move')} ms, member remove ${last('remove')} ms`,
      );
    }
  } finally {
    await agent.stop();
  }
  const agentGap = median(gaps.agent);
  ctx.rows.push(
    {
      section: SECTION,
      figure: `leave of the leader: longest stretch without an acknowledged write, p50 (n=${gaps.agent.length})`,
      value: agentGap,
      unit: 'ms',
      baseline: { name: 'etcdctl member remove of the leader (no hand-over), same writer, p50', value: median(gaps.remove), unit: 'ms' },
      ratio: { value: agentGap / median(gaps.remove), of: 'agent ÷ remove' },
      target: '≤ 0.5×',
      pass: agentGap / median(gaps.remove) <= 0.5,
      detail: { agent: summarize(gaps.agent), move: summarize(gaps.move), remove: summarize(gaps.remove) },
    },
    {
      section: SECTION,
      figure: 'context: the same stretch, leave of the leader',
      value: agentGap,
      unit: 'ms',
      baseline: { name: 'etcdctl move-leader alone, same writer, p50', value: median(gaps.move), unit: 'ms' },
      ratio: { value: agentGap / median(gaps.move), of: 'agent ÷ move-leader' },
    },
  );
}

async function measureDeadMemberLeave(ctx: BenchContext, cluster: LocalEtcdCluster): Promise<void> {
  const dead: number[] = [];
  const learner: number[] = [];
  const keeper = cluster.members[0].name;
  const admin = await agentBeside(ctx, cluster, keeper, 'promptness-dead-admin');
  try {
    for (let r = 0; r < pick(ctx, 3, 1); r++) {
      const victim = cluster.members.find((m) => m.name !== keeper && m.state === 'running')?.name as string;
      // Its pod's own agent, configured as deploy/ does by default: its own member is its only endpoint.
      const own = await agentBeside(ctx, cluster, victim, `promptness-dead-${r}`, [cluster.member(victim).clientURL], {
        ETCD_AGENT_LOCAL_PEER_URL: cluster.member(victim).peerURL,
      });
      try {
        await untilStatus(own, 'healthy');
        // The baseline first: a learner that never starts, added by the keeper, removed by this agent.
        const spec = await cluster.reserveMember(`promptness-learner-${r}`);
        expectOutcome(
          await admin.http.post('/v1/members/join', { name: spec.name, peerURLs: [spec.peerURL], timeoutSeconds: 30 }),
          202,
          'added',
        );
        learner.push(
          expectOutcome(
            await own.http.post('/v1/members/leave', { name: spec.name, peerURLs: [spec.peerURL], timeoutSeconds: 30 }),
            200,
            'removed',
          ).ms,
        );
        await cluster.kill(victim);
        dead.push(expectOutcome(await own.http.post('/v1/members/leave', { name: victim, timeoutSeconds: 30 }), 200, 'removed').ms);
      } finally {
        await own.stop();
      }
      await rejoin(cluster, admin, victim);
      ctx.log(
        `promptness: dead member's leave, round ${r + 1}: ${round(dead[dead.length - 1], 0)} ms, learner ${round(learner[learner.length - 1], 0)} ms`,
      );
    }
  } finally {
    await admin.stop();
  }
  ctx.rows.push({
    section: SECTION,
    figure: `leave of a SIGKILLed member by its own agent, p50 (n=${dead.length})`,
    value: median(dead),
    unit: 'ms',
    baseline: { name: 'the same agent removing a learner that never started, p50', value: median(learner), unit: 'ms' },
    ratio: { value: median(dead) / median(learner), of: 'dead ÷ learner' },
    target: '≤ 2×',
    pass: median(dead) / median(learner) <= 2,
    detail: { dead: summarize(dead), learner: summarize(learner) },
  });
}

/**
 * Waits until etcd accepts a membership change (a learner on a reserved peer URL, added then
 * removed): it refuses them as "unhealthy cluster" until its peers have been connected for 5 s.
 */
async function untilChangesAccepted(cluster: LocalEtcdCluster): Promise<void> {
  const peerURL = await cluster.reservePeerURL('promptness-probe');
  const until = performance.now() + 30_000;
  for (;;) {
    try {
      const out = await cluster.etcdctl(['member', 'add', 'promptness-probe', '--learner', `--peer-urls=${peerURL}`, '-w', 'json']);
      const id = BigInt(/"member":\{"ID":(\d+)/.exec(out)?.[1] ?? '0').toString(16);
      await cluster.etcdctl(['member', 'remove', id]);
      return;
    } catch (err) {
      if (performance.now() > until) throw err;
      await sleep(250);
    }
  }
}

/**
 * Adds a removed member back (new ports, empty data) through the agent: join, start its etcd, join
 * with `wait: true` until it is a voter, so the next round starts from three voters. Not timed: the
 * longest write gap of the round ends before it, at the removal.
 */
async function rejoin(cluster: LocalEtcdCluster, agent: AgentProcess, name: string): Promise<void> {
  const spec = await cluster.reserveMember(name);
  const body = { name, peerURLs: [spec.peerURL], timeoutSeconds: 30 };
  for (let tries = 0; ; tries++) {
    const added = await agent.http.post('/v1/members/join', body);
    if (added.status === 202) break;
    // etcd refuses the add for 5 s after the removal reconnected its peers ("unhealthy cluster").
    if (tries >= 10) throw new Error(`join of ${name} answered ${added.status}: ${JSON.stringify(added.body).slice(0, 300)}`);
  }
  await cluster.addMemberProcess(name, { wait: false });
  expectOutcome(await agent.http.post('/v1/members/join', { ...body, wait: true, timeoutSeconds: 60 }, 70_000), 200, 'promoted');
}

function expectOutcome(answer: HttpAnswer, status: number, outcome: string): HttpAnswer {
  const body = answer.body as { outcome?: string };
  if (answer.status !== status || body.outcome !== outcome)
    throw new Error(`${answer.request} answered ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}, not ${status} ${outcome}`);
  return answer;
}

function expectError(answer: HttpAnswer, status: number, code: string): HttpAnswer {
  const body = answer.body as { error?: { code?: string } };
  if (answer.status !== status || body.error?.code !== code)
    throw new Error(`${answer.request} answered ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}, not ${status} ${code}`);
  return answer;
}
