/**
 * Leave and leader transfer against real etcd: the leader hands over before it goes, a removal
 * that would lose quorum is refused unless forced, and the last voter is never removed. Each
 * story starts from a cluster of its own size (4, 3, 1 voters), not from what the one before left.
 *
 * etcd's own strict reconfiguration check is off in this cluster (--strict-reconfig-check=false)
 * so that what is tested is the agent's rule: with it on, etcd also refuses the forced removal
 * as "unhealthy cluster" once it notices the paused peer, which the agent reports as `unsafe` too.
 */
import type { RunningAgent } from '../../agent/agent';
import { withCluster } from '../helpers/etcd-cluster';
import { changesSent, leaderOf, post, startMemberAgent } from '../helpers/membership';
import { patience } from '../helpers/eventually';

const LEAVE = '/v1/members/leave';
const TRANSFER = '/v1/leader/transfer';

const ETCD_ARGS = { extraArgs: ['--strict-reconfig-check=false'] };

describe('leaving and moving leadership', () => {
  const cluster = withCluster(4, ETCD_ARGS);
  let agent: RunningAgent;

  beforeAll(async () => {
    agent = await startMemberAgent(cluster(), 'etcd-0');
  });

  afterAll(async () => {
    await agent?.stop(2000);
  });

  it('when leadership is moved to a named voter, then transferred, and asked again, already-leader', async () => {
    const before = await leaderOf(cluster());
    const to = ['etcd-0', 'etcd-1'].find((n) => n !== before.name) as string;
    const sentBefore = await changesSent(agent.metrics);

    const first = await post(agent, TRANSFER, { to });
    const second = await post(agent, TRANSFER, { to });

    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({ action: 'leaderTransfer', outcome: 'transferred', leaderTransferred: true, leader: { name: to } });
    expect((await leaderOf(cluster())).name).toBe(to);
    expect(second.json).toMatchObject({ outcome: 'already-leader', leaderTransferred: false, leader: { name: to } });
    // One MoveLeader for both calls (counted from this story's start: the stories share a cluster).
    expect((await changesSent(agent.metrics))['move-leader'] - sentBefore['move-leader']).toBe(1);
  });

  it("when leadership is moved away from this pod's member ({}), then another voter leads, and asked again, not-leader", async () => {
    await post(agent, TRANSFER, { to: 'etcd-0' });

    const away = await post(agent, TRANSFER, {});
    const again = await post(agent, TRANSFER, {});

    expect(away.json).toMatchObject({ outcome: 'transferred', leaderTransferred: true });
    expect(away.json.leader.name).not.toBe('etcd-0');
    expect((await leaderOf(cluster())).name).toBe(away.json.leader.name);
    expect(again.json).toMatchObject({ outcome: 'not-leader', leaderTransferred: false });
  });

  it('when the current leader is asked to leave, then leadership moves first (leaderTransferred), it is removed and the cluster keeps serving', async () => {
    const leader = await leaderOf(cluster());
    const before = await changesSent(agent.metrics);

    const reply = await post(agent, LEAVE, { name: leader.name });

    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ outcome: 'removed', complete: true, leaderTransferred: true, member: { id: leader.id } });
    const after = await changesSent(agent.metrics);
    expect(after['move-leader'] - before['move-leader']).toBe(1);
    expect(after.remove - before.remove).toBe(1);
    const rest = await cluster().listMembers(
      cluster()
        .clientURLs()
        .filter((u) => u !== leader.clientURL),
    );
    expect(rest.map((m) => m.name)).not.toContain(leader.name);
    expect(rest).toHaveLength(3);
    const endpoints = rest.map((m) => m.clientURLs[0]);
    await cluster().etcdctl(['put', 'after-leader-left', 'yes'], endpoints);
    expect(await cluster().etcdctl(['get', 'after-leader-left', '--print-value-only'], endpoints)).toBe('yes\n');
    expect(rest.map((m) => m.id)).toContain((await leaderOf(cluster())).id);
  });
});

describe('a removal that would lose quorum', () => {
  const cluster = withCluster(3, ETCD_ARGS);
  let agent: RunningAgent | undefined;

  afterAll(async () => {
    await agent?.stop(2000);
  });

  it(
    'when one of 3 voters is paused and another healthy one is asked to leave, then 409 unsafe and nothing changes; with force: true it is removed',
    async () => {
      const members = await cluster().listMembers();
      const leader = await leaderOf(cluster());
      const [paused, target] = members.filter((m) => m.id !== leader.id);
      // The agent of the leader's pod, talking to the two members that stay up (so every RPC goes to
      // one that answers), and giving a healthy member 1 s to answer its status call
      // (ETCD_AGENT_STATUS_TIMEOUT_MS; 2 s when asked again): a frozen member costs each status probe those 3 s.
      agent = await startMemberAgent(cluster(), leader.name, {
        ETCD_AGENT_ENDPOINTS: [leader.clientURL, target.clientURLs[0]].join(','),
        ETCD_AGENT_STATUS_TIMEOUT_MS: '1000',
        ETCD_AGENT_HEALTH_MAX_AGE_MS: '5000',
      });
      const before = await changesSent(agent.metrics);

      cluster().pause(paused.name);
      try {
        const refused = await post(agent, LEAVE, { name: target.name, timeoutSeconds: 20 });

        expect(refused.status).toBe(409);
        expect(refused.json.error).toMatchObject({
          code: 'unsafe',
          retryable: true,
          message: expect.stringContaining(`removing ${target.name} leaves 1 healthy voter of 2; quorum needs 2`),
          details: { voters: 3, healthyVoters: 2, required: 2, forceable: true },
        });
        expect(await changesSent(agent.metrics)).toEqual(before);
        expect((await cluster().listMembers([leader.clientURL])).map((m) => m.id).sort()).toEqual(members.map((m) => m.id).sort());

        const forced = await post(agent, LEAVE, { name: target.name, force: true, timeoutSeconds: 20 });

        expect(forced.status).toBe(200);
        expect(forced.json).toMatchObject({ outcome: 'removed', member: { id: target.id } });
        expect((await changesSent(agent.metrics)).remove - before.remove).toBe(1);
      } finally {
        cluster().resume(paused.name);
      }
      await cluster().waitHealthy(paused.name);
      const after = await cluster().listMembers([leader.clientURL]);
      expect(after.map((m) => m.id).sort()).toEqual([leader.id, paused.id].sort());
    },
    patience(90_000),
  );
});

describe('the last voter', () => {
  const cluster = withCluster(1, ETCD_ARGS);
  let agent: RunningAgent;

  beforeAll(async () => {
    agent = await startMemberAgent(cluster(), 'etcd-0');
  });

  afterAll(async () => {
    await agent?.stop(2000);
  });

  it('when the last voter is asked to leave, then 409 unsafe even with force', async () => {
    const before = await changesSent(agent.metrics);

    const refused = await post(agent, LEAVE, { name: 'etcd-0', force: true });

    expect(refused.status).toBe(409);
    expect(refused.json.error).toMatchObject({
      code: 'unsafe',
      message: expect.stringContaining('last voter'),
      details: { forceable: false },
    });
    expect(await changesSent(agent.metrics)).toEqual(before);
    expect((await cluster().listMembers()).map((m) => m.name)).toEqual(['etcd-0']);
  });
});
