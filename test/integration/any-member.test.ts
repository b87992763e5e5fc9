/**
 * Any agent, any state, against real etcd processes, every agent configured as deploy/
 * does by default: its endpoints are its own member only. Every call must still find a live member:
 * - etcd's "unhealthy cluster" in the 5 s after a peer connects is waited out inside the deadline;
 * - a learner's own agent finds the voters through the peer listener, reports the same health as a
 *   voter's agent, and promotes its member by itself once nothing holds it back;
 * - back-to-back joins (4th, then 5th as soon as the 4th is a voter) both succeed on their first call;
 * - the agent of a SIGKILLed member removes that member before its deadline, and /v1/operations
 *   answers; a SIGKILLed leader's own agent removes it once the others elected a new leader.
 * What etcd did (its guard after a peer connects, its elections) is read from etcd's own log
 * (helpers/raft-record.ts); how soon a promotion or a removal comes is the bench's figure.
 */
import type { RunningAgent } from '../../agent/agent';
import { Deadline } from '../../agent/lib/deadline';
import type { HeldLock } from '../../agent/etcd/held-lock';
import { MembershipLock } from '../../agent/etcd/lock';
import { createLogger } from '../../agent/observability/logger';
import { LocalEtcdCluster, startTestCluster } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';
import type { Answer } from '../helpers/http-call';
import { changesSent, get, leaderOf, post, startMemberAgent, until } from '../helpers/membership';
import { meets, RaftRecord } from '../helpers/raft-record';

const JOIN = '/v1/members/join';
/** The leaves' deadline (`timeoutSeconds`, docs/api.md §4): a leave that waited for its dead member would answer 504 `timeout` at it. */
const LEAVE_DEADLINE_S = 10;
const LEAVE = '/v1/members/leave';
/** How many times the guard case restarts the follower when etcd accepted the join inside the call (its guard ended there). */
const GUARD_ATTEMPTS = 5;

describe('any agent, with only its own member as endpoint, finds a live member for every call', () => {
  let c: LocalEtcdCluster;
  let raft: RaftRecord;
  const agents = new Map<string, RunningAgent>();
  let lock: HeldLock | undefined;

  /** The agent beside `name`, configured with its own member only (and its peer URL, for a learner). */
  async function agentBeside(name: string): Promise<RunningAgent> {
    const own = c.member(name);
    const agent = await startMemberAgent(c, name, { ETCD_AGENT_ENDPOINTS: own.clientURL, ETCD_AGENT_LOCAL_PEER_URL: own.peerURL });
    agents.set(name, agent);
    return agent;
  }

  beforeAll(async () => {
    c = await startTestCluster(3);
    raft = RaftRecord.ofFiles(() => c.members, 3);
    await agentBeside('etcd-0');
  }, patience(30_000));

  afterAll(async () => {
    await lock?.release();
    await Promise.all([...agents.values()].map((a) => a.stop(2000)));
    await c?.destroy();
  });

  const agent0 = (): RunningAgent => agents.get('etcd-0') as RunningAgent;

  /** Starts member `name`'s etcd (already added) and its agent. */
  async function startMember(name: string): Promise<RunningAgent> {
    await c.addMemberProcess(name, { wait: false });
    return agentBeside(name);
  }

  /** Waits (a patience) until the member list shows `name` a started voter. */
  async function untilVoter(name: string): Promise<void> {
    await eventually(
      async () =>
        expect((await c.listMembers([c.member('etcd-0').clientURL])).find((m) => m.name === name)).toMatchObject({ isLearner: false }),
      { within: 20_000, every: 100 },
    );
  }

  it('when etcd refuses a join as "unhealthy cluster" past the call\'s deadline while every voter answers, then it is retried and answered unsafe saying how long it waited', async () => {
    // etcd refuses membership changes for 5 s after a peer (re)connected, on every version: 3.4 wants
    // every voter connected for 5 s, 3.5.30+/3.6.11+/3.7 a quorum of the voters after the add, which
    // of 3 voters is all 3 (etcd-facts.test.ts shows where they differ). So a follower other than
    // etcd-0 is restarted, and the join is sent as soon as the agent sees it answer again, with the
    // agent's own connections made before: the window is the restart's, none of it spent on the
    // cluster's start. Where that guard began is etcd's own record (its `peer became active` lines).
    const spec = await c.reserveMember('etcd-9');
    expect((await get(agent0(), '/v1/members')).status).toBe(200);
    const leader = await leaderOf(c);
    const follower = ['etcd-1', 'etcd-2'].find((n) => n !== leader.name) as string;
    const trail: string[] = [];
    let reply: Answer | undefined;
    let call = { from: 0, to: 0, restartedAt: 0 };
    for (let attempt = 1; attempt <= GUARD_ATTEMPTS; attempt++) {
      const restartedAt = Date.now();
      await c.restart(follower);
      // The agent's channel to the restarted member is made again before the call (its health sees all
      // three answer), so the call's passes are not slowed by a reconnect.
      await until(
        () => get(agent0(), '/v1/health'),
        (a) => (a.json.members as Array<{ reachable: boolean }> | undefined)?.filter((m) => m.reachable).length === 3,
        15_000,
      );
      const from = Date.now();
      reply = await post(agent0(), JOIN, { name: 'etcd-9', peerURLs: [spec.peerURL], timeoutSeconds: 3 });
      call = { from, to: Date.now(), restartedAt };
      trail.push(`${reply.status} ${reply.json.outcome ?? reply.json.error?.code}`);
      if (reply.status !== 202) break;
      // etcd accepted the join inside the call: its guard ended there, which decides nothing about the
      // refusal this case is about. The learner goes again and the follower is restarted again.
      const added = (await c.listMembers()).find((m) => m.peerURLs.includes(spec.peerURL));
      if (added !== undefined) await c.etcdctl(['member', 'remove', added.id]);
    }

    expect({ trail, status: reply?.status }).toMatchObject({ status: 409 });
    const answer = reply as Answer;
    expect(answer.json.error).toMatchObject({ code: 'unsafe', retryable: true, details: { waitedMs: expect.any(Number) } });
    expect(answer.json.error.message).toMatch(/unhealthy cluster.*after \d+ ms of retries.*every voter answered/);
    // Retried inside its 3 s deadline (`timeoutSeconds`, docs/api.md §4) as the agent measured it, not
    // answered at the first refusal.
    expect(answer.json.error.details.waitedMs).toBeLessThanOrEqual(3000);
    expect((await changesSent(agent0().metrics)).add).toBeGreaterThan(1);
    // The refusal is etcd's guard: the call lay inside the 5 s after a peer of the restart became active.
    const guards = raft.guards().filter((g) => g.from >= call.restartedAt);
    expect(guards.map((g) => g.peer)).toContain(follower);
    expect(meets(call.from, call.to, guards)).toBe(true);
    expect((await c.listMembers()).some((m) => m.peerURLs.includes(spec.peerURL))).toBe(false);
  });

  it('when the 4th member is joined in the same window, then its first call waits etcd out and adds it (202)', async () => {
    const spec = await c.reserveMember('etcd-3');

    const reply = await post(agent0(), JOIN, { name: 'etcd-3', peerURLs: [spec.peerURL] });

    expect(reply.status).toBe(202);
    expect(reply.json).toMatchObject({ outcome: 'added', member: { peerURLs: [spec.peerURL], isLearner: true } });
  });

  it("when the learner's agent has only its own member as endpoint, then its /v1/health matches a voter agent's, and once free to it promotes its member itself", async () => {
    // A join in flight holds the lock: the learner stays a learner while the two answers are compared.
    lock = await new MembershipLock(agent0().cluster, {
      keyPrefix: agent0().config.keyPrefix,
      agent: 'etcd-0',
      logger: createLogger({ silent: true }),
    }).acquire({ action: 'memberJoin', member: { name: 'etcd-3', peerURLs: [] } }, Deadline.in(5000));
    const learnerAgent = await startMember('etcd-3');
    await until(
      () => get(learnerAgent, '/v1/health/local'),
      (a) => a.status === 200 && a.json.role === 'learner',
      15_000,
    );

    const [fromLearner, fromVoter] = await Promise.all(
      // With the operation records read: on 3.4 the learner's agent reads them through a voter it
      // finds first, and an observation whose budget ends before that answers without them (operationsError).
      [learnerAgent, agent0()].map((a) =>
        until(
          () => get(a, '/v1/health'),
          (x) => x.json.status === 'healthy' && x.json.members.length === 4 && x.json.operations !== undefined,
        ),
      ),
    );

    const view = (a: Answer): unknown => ({
      status: a.json.status,
      quorum: a.json.quorum,
      leader: a.json.leader,
      members: a.json.members.map((m: Record<string, unknown>) => [m.id, m.name, m.isLearner, m.reachable, m.isLeader]).sort(),
      operations: a.json.operations.map((o: { id: string }) => o.id),
    });
    expect(view(fromLearner)).toEqual(view(fromVoter));
    expect(fromLearner.json.quorum).toMatchObject({ voters: 3, healthyVoters: 3 });
    expect(fromLearner.json.operations).toHaveLength(1);

    // Nothing promoted it while the lock was held: it is still a learner when the lock goes.
    expect((await c.listMembers()).find((m) => m.name === 'etcd-3')).toMatchObject({ isLearner: true });
    await lock.release();
    lock = undefined;
    await untilVoter('etcd-3');

    // Its own agent promoted it, once (counted when the agent has MemberPromote's reply, which can
    // come after the list read above already shows the voter: the count is waited for); nobody else did.
    await eventually(async () => expect(await changesSent(learnerAgent.metrics)).toMatchObject({ promote: 1 }), {
      within: 10_000,
      every: 50,
    });
    expect(await changesSent(agent0().metrics)).toMatchObject({ promote: 0 });
  });

  it('when the 5th member is joined right after the 4th became a voter, then its first call succeeds within its deadline, and its own agent promotes it', async () => {
    const spec = await c.reserveMember('etcd-4');

    const t0 = Date.now();
    const reply = await post(agent0(), JOIN, { name: 'etcd-4', peerURLs: [spec.peerURL], timeoutSeconds: 30 });

    expect(reply.status).toBe(202);
    expect(reply.json).toMatchObject({ outcome: 'added', member: { peerURLs: [spec.peerURL], isLearner: true } });
    expect(Date.now() - t0).toBeLessThan(30_000);

    const fifth = await startMember('etcd-4');
    await untilVoter('etcd-4');
    // Its own agent's auto-promotion did it; no other agent sent a promote.
    await eventually(async () => expect(await changesSent(fifth.metrics)).toMatchObject({ promote: 1 }), { within: 10_000, every: 50 });
    expect(await changesSent(agent0().metrics)).toMatchObject({ promote: 0 });
    const members = await c.listMembers();
    expect(members.filter((m) => !m.isLearner && m.started)).toHaveLength(5);
  });

  it('when the member beside an agent is SIGKILLed, then that agent removes it (removed, with the member) before its deadline, and /v1/operations answers 200', async () => {
    const leader = await leaderOf(c);
    const victim = ['etcd-1', 'etcd-2'].find((n) => n !== leader.name) as string;
    const beside = await agentBeside(victim);
    // The agent has seen the cluster once, as a readiness probe or a health check would make it.
    await until(
      () => get(beside, '/v1/health'),
      (a) => a.json.status === 'healthy',
    );
    const id = (await c.listMembers()).find((m) => m.name === victim)?.id;
    await c.kill(victim);

    const reply = await post(beside, LEAVE, { name: victim, timeoutSeconds: LEAVE_DEADLINE_S });
    const operations = await get(beside, '/v1/operations');

    // Removed, not 504 `timeout` at the deadline: the agent did not wait for its own dead member.
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ outcome: 'removed', complete: true, member: { id, name: victim } });
    expect(operations.status).toBe(200);
    expect(operations.json.operations).toEqual([]);
    expect((await c.listMembers()).map((m) => m.name)).not.toContain(victim);
  });

  // A dead leader first needs an election, and MemberRemove needs a leader.
  it('when the leader beside an agent is SIGKILLed, then that agent removes it once a new leader is elected (removed, with the member), before its deadline', async () => {
    const leader = await leaderOf(c);
    const beside = agents.get(leader.name) ?? (await agentBeside(leader.name));
    await until(
      () => get(beside, '/v1/health'),
      (a) => a.json.status === 'healthy',
    );
    await c.kill(leader.name);
    const killedAt = Date.now();

    const reply = await post(beside, LEAVE, { name: leader.name, timeoutSeconds: LEAVE_DEADLINE_S });
    const answeredAt = Date.now();

    expect({ status: reply.status, json: reply.json }).toMatchObject({
      status: 200,
      json: { outcome: 'removed', complete: true, member: { id: leader.id, name: leader.name } },
    });
    // The survivors elected a new leader at a higher term, as etcd logged it, before the answer.
    const election = raft.elections().find((e) => e.from >= killedAt);
    expect(election).toMatchObject({ before: { leader: leader.name }, after: { leader: expect.not.stringMatching(leader.name) } });
    expect(election?.after?.term).toBeGreaterThan(election?.before?.term ?? Infinity);
    expect(election?.to).toBeLessThanOrEqual(answeredAt);
    expect((await get(beside, '/v1/operations')).status).toBe(200);
    const rest = await c.listMembers();
    expect(rest.map((m) => m.name)).not.toContain(leader.name);
    expect(rest).toHaveLength(3);
  });
});
