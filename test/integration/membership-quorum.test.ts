/**
 * No quorum, no waiting, against real etcd: with fewer voters answering than a quorum,
 * every call that reads through a quorum answers 503 `unavailable` with the figures, instead of the
 * 504 `timeout` a call that waited would answer at its deadline; an election (a quorum answers, no
 * leader for a moment) is waited out as before; and `wait: true` joins wait for the quorum to come
 * back inside their deadline. The outcome tells "at once" from "waited"; how soon the answer comes is
 * the bench's figure (scripts/bench/promptness.ts).
 *
 * The election and the quorum loss share one 3-member cluster: the first restarts the leader it
 * killed, and the second starts from three voters whoever leads.
 */
import type { RunningAgent } from '../../agent/agent';
import { withCluster, type ListedMember, type MemberSpec } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';
import type { Answer } from '../helpers/http-call';
import { changesSent, etcdAcceptsChanges, get, leaderOf, post, startMemberAgent } from '../helpers/membership';
import { RaftRecord } from '../helpers/raft-record';
import { runCli } from '../helpers/run-process';

const JOIN = '/v1/members/join';
const LEAVE = '/v1/members/leave';
const PROMOTE = '/v1/members/promote';
const TRANSFER = '/v1/leader/transfer';
const ACTION = '/v1.0/action';
/**
 * Every call's deadline here (`timeoutSeconds`, and ETCD_AGENT_TIMEOUT_SECONDS for the reads:
 * docs/api.md §4 Deadlines). A call that waited for the quorum would answer 504 `timeout` at it.
 */
const DEADLINE_S = 30;

/** Runs `call` and answers what it answered, when it was sent and received (epoch ms) and how long it took. */
async function timed<T>(call: () => Promise<T>): Promise<{ answer: T; start: number; end: number; ms: number }> {
  const start = Date.now();
  const answer = await call();
  const end = Date.now();
  return { answer, start, end, ms: end - start };
}

/** Maintenance.Status calls the agent has sent that ended with `result` (etcd_agent_status_rpcs_total). */
async function statusRpcs(agent: RunningAgent, result: string): Promise<number> {
  return (await agent.metrics.statusRpcs.get()).values.filter((v) => v.labels.result === result).reduce((sum, v) => sum + v.value, 0);
}

/** The member list without what moves by itself (ids, names, roles, URLs): what a change would change. */
const shape = (members: ListedMember[]): string[] =>
  members.map((m) => `${m.id} ${m.name} ${m.isLearner ? 'learner' : 'voter'} ${m.peerURLs.join(',')}`).sort();

describe('4 voters, 2 of them killed: no quorum', () => {
  const cluster = withCluster(4);
  let agent: RunningAgent;
  let etcd4: MemberSpec;
  let before: ListedMember[];

  beforeAll(async () => {
    // An observation stays fresh for 3 s here, so that a call right after /v1/health is served by that
    // observation, not one of its own (one made while no quorum answers takes the status timeout).
    agent = await startMemberAgent(cluster(), 'etcd-0', {
      ETCD_AGENT_HEALTH_MAX_AGE_MS: '3000',
      ETCD_AGENT_TIMEOUT_SECONDS: String(DEADLINE_S),
    });
    etcd4 = await cluster().reserveMember('etcd-4');
    before = await cluster().listMembers();
    // A running agent: the first call after a start loads express and connects (README, "Limits").
    expect((await get(agent, '/v1/members')).status).toBe(200);
    await etcdAcceptsChanges(cluster());
  }, patience(30_000));

  afterAll(async () => {
    await agent?.stop(2000);
  });

  const figures = { voters: 4, healthyVoters: 2, required: 3 };
  const calls: Array<[string, () => Promise<Answer>]> = [
    ['join of a new member', () => post(agent, JOIN, { name: 'etcd-4', peerURLs: [etcd4.peerURL], timeoutSeconds: DEADLINE_S })],
    ['leave of a dead member', () => post(agent, LEAVE, { name: 'etcd-3', timeoutSeconds: DEADLINE_S })],
    ['leave of a live member', () => post(agent, LEAVE, { name: 'etcd-1', timeoutSeconds: DEADLINE_S })],
    ['promote', () => post(agent, PROMOTE, { name: 'etcd-1', timeoutSeconds: DEADLINE_S })],
    ['transfer', () => post(agent, TRANSFER, { to: 'etcd-1', timeoutSeconds: DEADLINE_S })],
    ['GET /v1/members', () => get(agent, '/v1/members')],
    ['GET /v1/operations', () => get(agent, '/v1/operations')],
  ];

  describe('while etcd-2 and etcd-3 are down', () => {
    beforeAll(async () => {
      await Promise.all([cluster().kill('etcd-2'), cluster().kill('etcd-3')]);
    });

    it.each(calls)(
      'when %s is asked, then 503 unavailable, not a timeout at its deadline, naming 2 of 4 voters answering and 3 needed',
      async (_what, ask) => {
        const { answer, ms } = await timed(ask);

        expect(answer.status).toBe(503);
        expect(answer.json.error).toEqual({
          code: 'unavailable',
          message: expect.stringContaining('no quorum: 2 of 4 voters answer, 3 needed'),
          retryable: true,
          details: figures,
        });
        expect(ms).toBeLessThan(DEADLINE_S * 1000);
      },
    );

    it('when /v1/health has just observed the cluster, then a call answers from that observation, with no Status call of its own', async () => {
      const health = await get(agent, '/v1/health');
      // Its healthyVoters are those that also agree on a leader (none here); 2 members answered.
      expect(health.json.quorum).toMatchObject({ voters: 4, required: 3, hasQuorum: false });
      expect(health.json.members.filter((m: { reachable: boolean }) => m.reachable)).toHaveLength(2);
      const statusCalls = await statusRpcs(agent, 'unavailable');

      const { answer, ms } = await timed(() => post(agent, LEAVE, { name: 'etcd-1', timeoutSeconds: DEADLINE_S }));

      expect(answer.status).toBe(503);
      expect(answer.json.error.details).toEqual(figures);
      expect(ms).toBeLessThan(DEADLINE_S * 1000);
      // A probe would have asked etcd-2 and etcd-3 (unreachable); the auto-promotion loop asks only etcd-0.
      expect(await statusRpcs(agent, 'unavailable')).toBe(statusCalls);
    });

    it('when the kbagent route is asked for memberJoin and memberLeave, then {error: failed} before the deadline, the message naming the figures', async () => {
      const join = await timed(() =>
        post(agent, ACTION, {
          action: 'memberJoin',
          parameters: { KB_JOIN_MEMBER_POD_NAME: 'etcd-4', KB_JOIN_MEMBER_POD_FQDN: new URL(etcd4.peerURL).hostname },
          timeoutSeconds: DEADLINE_S,
        }),
      );
      const leave = await timed(() =>
        post(agent, ACTION, { action: 'memberLeave', parameters: { KB_LEAVE_MEMBER_POD_NAME: 'etcd-3' }, timeoutSeconds: DEADLINE_S }),
      );

      for (const { answer, ms } of [join, leave]) {
        expect(answer.status).toBe(200);
        expect(answer.json).toEqual({ error: 'failed', message: expect.stringContaining('no quorum: 2 of 4 voters answer, 3 needed') });
        expect(ms).toBeLessThan(DEADLINE_S * 1000);
      }
    });

    it('when the CLI asks for members and a leave, then it exits 4 (call again later) and its message names the figures', async () => {
      const members = await runCli(['members', '--agent', agent.listening.url, '--summary']);
      const leave = await runCli(['leave', 'etcd-3', '--agent', agent.listening.url, '--summary']);

      for (const ran of [members, leave]) {
        expect(ran.code).toBe(4);
        expect(ran.stderr).toMatch(
          /^etcd-lifecycle-agent (members|leave): unavailable: no quorum: 2 of 4 voters answer, 3 needed; .*\(call again later\)\n$/,
        );
      }
    });

    it('when all that was asked, then no membership RPC was sent', async () => {
      expect(await changesSent(agent.metrics)).toEqual({ add: 0, remove: 0, promote: 0, 'move-leader': 0 });
    });
  });

  describe('once etcd-2 is back (3 of 4 voters)', () => {
    beforeAll(async () => {
      await cluster().restart('etcd-2');
      // As a controller would: call again once the agent has seen the quorum back. An observation of
      // the last second that found none is still the agent's answer (its bounded age) until then.
      await eventually(async () => expect((await get(agent, '/v1/health')).json.quorum?.hasQuorum).toBe(true), {
        within: 20_000,
        every: 100,
      });
    }, patience(30_000));

    it('when the member list is read, then nothing changed while the quorum was lost', async () => {
      expect(shape(await cluster().listMembers())).toEqual(shape(before));
    });

    it(
      'when the same calls are made again, then they succeed',
      async () => {
        const ok = (a: Answer): string => `${a.status} ${a.json.outcome ?? (a.json.members === undefined ? '' : 'members')}`;

        expect(ok(await get(agent, '/v1/members'))).toBe('200 members');
        expect((await get(agent, '/v1/operations')).status).toBe(200);
        expect(ok(await post(agent, LEAVE, { name: 'etcd-3' }))).toBe('200 removed');
        expect(ok(await post(agent, PROMOTE, { name: 'etcd-1' }))).toBe('200 already-member');
        expect(ok(await post(agent, TRANSFER, { to: 'etcd-1' }))).toMatch(/^200 (transferred|already-leader)$/);
        // etcd refuses the add as "unhealthy cluster" until etcd-2 has been back 5 s: the agent retries it
        // inside the call's deadline (`timeoutSeconds` 15, docs/api.md §4), which holds those 5 s three times.
        expect(ok(await post(agent, JOIN, { name: 'etcd-4', peerURLs: [etcd4.peerURL], timeoutSeconds: 15 }))).toBe('202 added');
        expect(ok(await post(agent, LEAVE, { name: 'etcd-1' }))).toBe('200 removed');
        const after = await cluster().listMembers();
        expect(after.map((m) => `${m.name || m.peerURLs[0]} ${m.isLearner ? 'learner' : 'voter'}`).sort()).toEqual(
          ['etcd-0 voter', 'etcd-2 voter', `${etcd4.peerURL} learner`].sort(),
        );
      },
      patience(60_000),
    );
  });
});

describe('3 voters: an election, then a quorum loss', () => {
  const cluster = withCluster(3);
  const raft = RaftRecord.ofFiles(() => cluster().members, 3);

  describe('while the leader is replaced: an election is not a lost quorum', () => {
    let agent: RunningAgent;
    let killed: string | undefined;

    afterAll(async () => {
      await agent?.stop(2000);
      // Its pod comes back, as Kubernetes would restart it: the next story starts from three voters.
      if (killed !== undefined) await cluster().restart(killed);
    });

    it('when calls are made right after the leader is killed, then they wait out the election and succeed', async () => {
      const leader = await leaderOf(cluster());
      const [self, other] = ['etcd-0', 'etcd-1', 'etcd-2'].filter((n) => n !== leader.name);
      agent = await startMemberAgent(cluster(), self);
      expect((await get(agent, '/v1/members')).status).toBe(200);

      await cluster().kill(leader.name);
      killed = leader.name;
      const killedAt = Date.now();
      const answers = await Promise.all(
        [
          () => get(agent, '/v1/members'),
          () => get(agent, '/v1/operations'),
          () => post(agent, JOIN, { name: other }),
          () => post(agent, LEAVE, { name: 'etcd-9' }),
          () => post(agent, PROMOTE, { name: other }),
          () => post(agent, TRANSFER, { to: other }),
        ].map((ask) => timed(ask)),
      );

      expect(answers.map(({ answer: a }) => `${a.status} ${a.json.outcome ?? a.json.error?.code ?? ''}`.trim())).toEqual([
        '200',
        '200',
        '200 already-member',
        '200 already-absent',
        '200 already-member',
        expect.stringMatching(/^200 (transferred|already-leader)$/),
      ]);
      // What they waited out, as etcd logged it: the survivors elected a new leader at a higher term,
      // and every call, each of which reads through a quorum, was answered after that.
      const election = raft.elections().find((e) => e.from >= killedAt);
      expect(election).toMatchObject({ before: { leader: leader.name }, after: { leader: expect.not.stringMatching(leader.name) } });
      expect(election?.after?.term).toBeGreaterThan(election?.before?.term ?? Infinity);
      expect(answers.filter((a) => a.end < (election?.to ?? Infinity)).map((a) => a.answer.json)).toEqual([]);
    });
  });

  describe('wait: true through a quorum loss', () => {
    let agent: RunningAgent;
    let etcd3: MemberSpec;

    beforeAll(async () => {
      agent = await startMemberAgent(cluster(), 'etcd-0');
      etcd3 = await cluster().reserveMember('etcd-3');
      await etcdAcceptsChanges(cluster());
      // A started learner, which a join with wait: true promotes once a quorum can decide it.
      const added = await post(agent, JOIN, { name: 'etcd-3', peerURLs: [etcd3.peerURL] });
      expect(added.status).toBe(202);
      await cluster().addMemberProcess('etcd-3', { wait: false });
    });

    afterAll(async () => {
      await agent?.stop(2000);
    });

    it(
      "when a quorum loss outlasts one join's deadline and ends inside another's, then the first answers unavailable with the figures at its deadline and the second succeeds once the quorum is back",
      async () => {
        const lost = ['etcd-1', 'etcd-2'].filter((n) => cluster().member(n).state === 'running');
        await Promise.all(lost.map((n) => cluster().kill(n)));

        const short = timed(() => post(agent, JOIN, { name: 'etcd-3', peerURLs: [etcd3.peerURL], wait: true, timeoutSeconds: 3 }));
        const long = timed(() => post(agent, JOIN, { name: 'etcd-3', peerURLs: [etcd3.peerURL], wait: true, timeoutSeconds: 40 }));
        // The quorum comes back once the short call has answered: its whole deadline fell inside the loss.
        const outlasted = await short;
        const restartedAt = Date.now();
        await Promise.all(lost.map((n) => cluster().restart(n, { wait: false })));

        expect(outlasted.answer.status).toBe(503);
        expect(outlasted.answer.json.error).toEqual({
          code: 'unavailable',
          message: expect.stringContaining('no quorum: 1 of 3 voters answer, 2 needed'),
          retryable: true,
          details: { voters: 3, healthyVoters: 1, required: 2 },
        });
        // It waited for the quorum inside its 3 s deadline and answered by it: its last pass runs 1 s
        // before the deadline (docs/api.md §4, wait: true), and the answer comes at the deadline at most.
        expect(outlasted.ms).toBeGreaterThan(1500);
        expect(outlasted.ms).toBeLessThan(3500);

        const recovered = await long;
        expect(recovered.answer.status).toBe(200);
        expect(recovered.answer.json).toMatchObject({
          outcome: 'promoted',
          complete: true,
          phase: 'voter',
          member: { name: 'etcd-3', isLearner: false },
        });
        expect(recovered.end).toBeGreaterThan(restartedAt);
      },
      patience(60_000),
    );
  });
});

describe('3 voters, 2 of them frozen (SIGSTOP): silent, but refusing nothing either', () => {
  const cluster = withCluster(3);
  let agent: RunningAgent;

  beforeAll(async () => {
    // An observation stays fresh for 10 s here, so that the call below meets the one /v1/health made.
    agent = await startMemberAgent(cluster(), 'etcd-0', { ETCD_AGENT_HEALTH_MAX_AGE_MS: '10000' });
    expect((await get(agent, '/v1/members')).status).toBe(200);
  }, patience(30_000));

  afterAll(async () => {
    await agent?.stop(2000);
  });

  it('when /v1/health has just seen them give no answer in time, then a call does not take that for proof: it asks them itself, twice each, before it answers unavailable', async () => {
    cluster().pause('etcd-1');
    cluster().pause('etcd-2');
    try {
      await callMeetsFrozenVoters(Date.now());
    } finally {
      for (const name of ['etcd-1', 'etcd-2']) cluster().resume(name);
    }
  });

  async function callMeetsFrozenVoters(pausedAt: number): Promise<void> {
    const health = await eventually(
      async () => {
        const answer = await get(agent, '/v1/health');
        expect(Date.parse(answer.json.observedAt)).toBeGreaterThanOrEqual(pausedAt);
        return answer;
      },
      { within: 15_000, every: 200 },
    );
    // What the call meets: a fresh observation without a quorum, whose silent voters ran out of time.
    expect(health.json.quorum).toMatchObject({ voters: 3, hasQuorum: false });
    for (const name of ['etcd-1', 'etcd-2']) {
      const member = health.json.members.find((m: { name: string }) => m.name === name);
      expect(member).toMatchObject({ reachable: false, errors: [expect.stringMatching(/no answer within \d+ ms/)] });
    }
    const silentBefore = await statusRpcs(agent, 'unavailable');

    const answer = await get(agent, '/v1/members');

    expect(answer.status).toBe(503);
    expect(answer.json.error).toEqual({
      code: 'unavailable',
      message: expect.stringContaining('no quorum: 1 of 3 voters answer, 2 needed'),
      retryable: true,
      details: { voters: 3, healthyVoters: 1, required: 2 },
    });
    // The gate's own probe asked each frozen member, and once more with twice the time, before it said so.
    expect((await statusRpcs(agent, 'unavailable')) - silentBefore).toBeGreaterThanOrEqual(4);
  }
});
