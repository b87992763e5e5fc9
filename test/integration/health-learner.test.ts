/**
 * A learner and an alarm as /v1/health and /v1/health/local show them, against real etcd.
 *
 * The learner's raft traffic runs through TCP fronts (test/helpers/peer-fronts.ts), so the test can
 * cut it off from its peers while its client port still answers: a learner that falls behind.
 * A membership lock held as a joining agent holds it keeps the learner a learner (its own agent
 * would otherwise promote it as soon as it is in sync, docs/api.md §4 join) and shows up in
 * `operations`, which is how a consumer tells a member being added from a member lost.
 */
import type { RunningAgent } from '../../agent/agent';
import { Deadline } from '../../agent/lib/deadline';
import type { HeldLock } from '../../agent/etcd/held-lock';
import { MembershipLock } from '../../agent/etcd/lock';
import { createLogger } from '../../agent/observability/logger';
import { fillUntilNoSpace, LocalEtcdCluster, startTestCluster } from '../helpers/etcd-cluster';
import type { Answer } from '../helpers/http-call';
import { get, startMemberAgent, until } from '../helpers/membership';
import { PeerFronts } from '../helpers/peer-fronts';
import { patience } from '../helpers/eventually';

const LEARNER = 'etcd-3';

describe('a learner catching up, and an alarm, seen through /v1/health and /v1/health/local', () => {
  const fronts = new PeerFronts();
  let c: LocalEtcdCluster;
  let agent: RunningAgent; // beside etcd-0
  let beside: RunningAgent; // beside the learner
  let lock: HeldLock | undefined;
  let learnerId: string;

  beforeAll(async () => {
    await fronts.prepare('etcd-0', 'etcd-1', 'etcd-2', LEARNER);
    c = await startTestCluster(3, {
      memberArgs: fronts.memberArgs,
      // The strict check would refuse the add for 5 s after start; the quota lets the last test raise NOSPACE.
      extraArgs: ['--strict-reconfig-check=false', '--quota-backend-bytes=3000000'],
    });
    agent = await startMemberAgent(c, 'etcd-0');
  }, patience(30_000));

  afterAll(async () => {
    await lock?.release();
    await Promise.all([agent, beside].map((a) => a?.stop(2000)));
    await c?.destroy();
    await fronts.close();
  });

  const health = (): Promise<Answer> => get(agent, '/v1/health');
  const local = (): Promise<Answer> => get(beside, '/v1/health/local');

  it('when a learner is added while a join holds the membership lock, then /v1/health is healthy and lists the join in operations', async () => {
    await until(health, (a) => a.json.status === 'healthy');
    lock = await new MembershipLock(agent.cluster, {
      keyPrefix: agent.config.keyPrefix,
      agent: 'etcd-0',
      logger: createLogger({ silent: true }),
    }).acquire({ action: 'memberJoin', member: { name: LEARNER, peerURLs: [] } }, Deadline.in(5000));
    const spec = await c.reserveMember(LEARNER);
    await c.etcdctl(['member', 'add', LEARNER, '--learner', `--peer-urls=${spec.peerURL}`]);
    await c.addMemberProcess(LEARNER);
    learnerId = (await c.listMembers()).find((m) => m.name === LEARNER)?.id as string;

    // An observation whose read of the operation records missed its budget is still healthy, and says
    // so in its errors instead of listing them: one that read them is waited for.
    const answer = await until(
      health,
      (a) => a.json.status === 'healthy' && a.json.members.length === 4 && a.json.operations !== undefined,
    );

    expect(answer.json.quorum).toMatchObject({ voters: 3, healthyVoters: 3, faultTolerance: 1 });
    expect(answer.json.members.find((m: { name: string }) => m.name === LEARNER)).toMatchObject({
      id: learnerId,
      isLearner: true,
      reachable: true,
      errors: [],
    });
    expect(answer.json.operations).toEqual([
      expect.objectContaining({ action: 'memberJoin', member: { name: LEARNER, peerURLs: [] }, agent: 'etcd-0' }),
    ]);
  });

  it('when the learner is in sync, then /v1/health/local beside it is 200 with role learner', async () => {
    // Its endpoints are its own etcd and one other, as deploy/ configures them (127.0.0.1 and the
    // headless Service). etcd 3.4 refuses a learner MemberList, so whenever the client picks the
    // learner the agent must read the list at a voter that answered its Status call.
    const learnerURL = c.member(LEARNER).clientURL;
    await expect(c.etcdctl(['member', 'list'], [learnerURL])).rejects.toThrow(/not supported for learner/);
    beside = await startMemberAgent(c, LEARNER, { ETCD_AGENT_ENDPOINTS: `${learnerURL},${c.member('etcd-1').clientURL}` });

    const answer = await until(local, (a) => a.status === 200);

    expect(answer.json).toMatchObject({ id: learnerId, name: LEARNER, role: 'learner', isLearner: true, isLeader: false, reachable: true });
    // The etcd container's readiness probe: a learner is not ready, in sync or not (etcd's /readyz agrees from 3.5.19).
    const asVoter = await get(beside, '/v1/health/local?voter=true');
    expect(asVoter.status).toBe(503);
    expect(asVoter.json).toMatchObject({
      role: 'learner',
      error: { code: 'unavailable', message: expect.stringMatching(/^a learner serves no client requests/) },
    });
  });

  it('when the learner is cut off from its peers and falls behind, then /v1/health/local is 503 (lagging, role learner) and /v1/health degraded', async () => {
    fronts.isolate(LEARNER, learnerId);
    const leader = (await health()).json.members.find((m: { isLeader: boolean }) => m.isLeader);
    // More than 10% of the leader's index: etcd would no longer promote it (learner in sync = 90%).
    const writes = Math.ceil(leader.raftIndex / 8) + 20;
    for (let i = 0; i < writes; i += 20) {
      await Promise.all(Array.from({ length: Math.min(20, writes - i) }, (_, j) => agent.cluster.raw.put(`lag/${i + j}`).value('x')));
    }

    const notReady = await until(local, (a) => a.status === 503);
    const cluster = await until(health, (a) => a.json.status === 'degraded');

    expect(notReady.json).toMatchObject({ name: LEARNER, role: 'learner', reachable: true, error: { code: 'unavailable' } });
    expect(notReady.json.errors.join(' ')).toMatch(/lagging: raft index \d+ is behind the leader's \d+/);
    const learner = cluster.json.members.find((m: { name: string }) => m.name === LEARNER);
    expect(learner).toMatchObject({ reachable: true, isLearner: true });
    expect(learner.errors.join(' ')).toMatch(/lagging/);
    expect(cluster.json.quorum).toMatchObject({ voters: 3, healthyVoters: 3, hasQuorum: true });
  });

  it('when the learner is let back in, then it catches up: 200 role learner and healthy; once the lock is released its agent promotes it', async () => {
    fronts.heal(LEARNER);

    await until(local, (a) => a.status === 200 && a.json.role === 'learner');
    await until(health, (a) => a.json.status === 'healthy');

    await lock?.release();
    lock = undefined;
    const promoted = await until(local, (a) => a.status === 200 && a.json.role === 'follower', 20_000);
    expect(promoted.json).toMatchObject({ isLearner: false });
    expect((await get(beside, '/v1/health/local?voter=true')).status).toBe(200);
    const after = await until(health, (a) => a.json.status === 'healthy' && a.json.quorum.voters === 4);
    expect(after.json.quorum).toMatchObject({ voters: 4, healthyVoters: 4, required: 3, faultTolerance: 1 });
    expect(after.json.operations).toEqual([]);
  });

  it('when the backend quota is exceeded, then the NOSPACE alarm makes the cluster degraded and names the member', async () => {
    const refused = await fillUntilNoSpace((key, value) => agent.cluster.raw.put(key).value(value).exec());
    expect(String(refused)).toMatch(/database space exceeded/);

    // An observation that found the alarm and a quorum answering: right after the fill, one may find
    // fewer than a quorum of Status answers within its budget and say `unavailable`, which is true of
    // that observation; the alarm's own effect is what this case asks about.
    const answer = await until(health, (a) => a.json.alarms.length > 0 && a.json.quorum?.hasQuorum === true);

    expect(answer.json.status).toBe('degraded');
    expect(answer.json.alarms[0]).toMatchObject({ alarm: 'NOSPACE' });
    expect(answer.json.members.map((m: { id: string }) => m.id)).toContain(answer.json.alarms[0].memberId);
    expect(answer.json.alarms[0].name).toMatch(/^etcd-\d$/);
  });
});
