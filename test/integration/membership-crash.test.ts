/**
 * The agent dies (SIGKILL) in the middle of a membership change — right after
 * etcd accepted MemberAdd, or MoveLeader, and before the agent answered — and a
 * restarted agent, given the same call, converges: no second member, no lost
 * removal (the KubeBlocks and Cluster API incidents). The agent is the built
 * binary (the bin, `etcd-lifecycle-agent serve`) run as a child process.
 *
 * To make "before it answered" certain rather than a race, the dying agent
 * reaches etcd through a TCP proxy that the test freezes at the instant the
 * agent logs that the RPC returned: every later call it makes through the proxy
 * (recording its next step, releasing the lock) hangs, and the kill lands
 * before it could answer or send its next RPC.
 */
import type { RunningAgent } from '../../agent/agent';
import { ChildAgent, MAIN_JS as main } from '../helpers/child-agent';
import { withCluster } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';
import type { Answer } from '../helpers/http-call';
import { etcdAcceptsChanges, get, leaderOf, post, startMemberAgent } from '../helpers/membership';
import { TcpProxy } from '../helpers/tcp-proxy';

const JOIN = '/v1/members/join';
const LEAVE = '/v1/members/leave';

/** A request that the test expects never to be answered: resolves with the answer or what went wrong. */
function settled(p: Promise<Answer>): Promise<{ status: number } | { failed: string }> {
  return p.then(
    (answer) => ({ status: answer.status }),
    (err: Error) => ({ failed: err.message }),
  );
}

/** The membership lock's lease (docs/api.md §4 Calling again, timings.ts LOCK_TTL_SECONDS): a dead agent's lock and record go with it. */
const LOCK_LEASE_MS = 10_000;
/**
 * How late after its TTL etcd may remove an expired lease: its lessor looks for expired leases every
 * 500 ms and revokes them through raft, and this test reads the records once every 250 ms.
 */
const LEASE_EXPIRY_MS = 5000;

describe('the agent killed in the middle of a membership change', () => {
  const cluster = withCluster(3);
  const children: ChildAgent[] = [];
  const proxies: TcpProxy[] = [];
  let observer: RunningAgent;

  beforeAll(async () => {
    // Another pod's agent, to look at the operation records while etcd-0's agent is dead.
    observer = await startMemberAgent(cluster(), 'etcd-2');
  }, patience(120_000));

  afterEach(async () => {
    for (const child of children.splice(0)) await child.kill('SIGKILL');
    await Promise.all(proxies.splice(0).map((p) => p.close()));
  });

  afterAll(async () => {
    await observer?.stop(2000);
  });

  /** etcd-0's agent; through a proxy to `via` when given, else straight to every member. */
  async function podAgent(via?: TcpProxy, crashPoints?: string): Promise<ChildAgent> {
    const agent = await ChildAgent.start(main, {
      ...(crashPoints === undefined ? {} : { ETCD_AGENT_CRASH_POINTS: crashPoints }),
      ETCD_AGENT_MEMBER_NAME: 'etcd-0',
      ETCD_AGENT_ENDPOINTS: via?.url ?? cluster().clientURLs().join(','),
      ETCD_AGENT_LOCAL_ENDPOINT: cluster().member('etcd-0').clientURL,
      ETCD_AGENT_LOG_LEVEL: 'info',
    });
    children.push(agent);
    return agent;
  }

  it('when the agent dies after moving leadership away from a leaving leader, then the same leave on the restarted agent removes it (no second move) without waiting for the dead lock', async () => {
    await etcdAcceptsChanges(cluster());
    const leader = await leaderOf(cluster());
    const other = cluster().members.find((m) => m.name !== leader.name) as { clientURL: string };
    const proxy = await TcpProxy.start(other.clientURL);
    proxies.push(proxy);
    // Killed exactly after the MoveLeader answered (a crash point: a kill sent on its log line landed
    // a few milliseconds later, sometimes past the MemberRemove), the proxy frozen as it dies.
    const dying = await podAgent(proxy, 'leave-leadership-moved');
    dying.onLine(
      (l) => l.message === 'membership change' && l.what === 'move-leader' && l.outcome === 'done',
      () => proxy.freeze(),
    );

    const first = await settled(post(dying.url, LEAVE, { name: leader.name }, 20_000));
    await dying.exited;

    expect(first).toEqual({ failed: expect.stringMatching(/socket hang up|ECONNRESET/) }); // killed before it answered
    expect(dying.lines.some((l) => l.what === 'remove')).toBe(false); // and before it sent MemberRemove
    const afterCrash = await cluster().listMembers();
    expect(afterCrash.map((m) => m.name)).toContain(leader.name);
    expect((await leaderOf(cluster())).name).not.toBe(leader.name);
    const records = (await get(observer, '/v1/operations')).json.operations;
    expect(records).toEqual([
      expect.objectContaining({ action: 'memberLeave', agent: 'etcd-0', member: expect.objectContaining({ name: leader.name }) }),
    ]);

    const restarted = await podAgent();
    const again = await post(restarted.url, LEAVE, { name: leader.name });

    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ outcome: 'removed', leaderTransferred: false, member: { id: leader.id } });
    expect(await restarted.counter('etcd_agent_membership_changes_total', 'kind="move-leader"')).toBe(0);
    expect(await restarted.counter('etcd_agent_membership_changes_total', 'kind="remove"')).toBe(1);
    // Taken over, not waited for: the restarted agent found the dead operation's lock still in etcd (a
    // key whose lease had expired would be gone) and revoked its lease, which it logs with that operation.
    const takeover = restarted.lines.find((l) => String(l.message).startsWith('took over a membership lock'));
    expect(takeover).toMatchObject({ operationId: records[0].id, agent: 'etcd-0' });
    const rest = await cluster().listMembers(
      cluster()
        .clientURLs()
        .filter((u) => u !== leader.clientURL),
    );
    expect(rest.map((m) => m.name).sort()).toEqual(
      afterCrash
        .filter((m) => m.id !== leader.id)
        .map((m) => m.name)
        .sort(),
    );
    expect((await get(observer, '/v1/operations')).json.operations).toEqual([]);
  });

  it('when the agent dies after etcd accepted its MemberAdd, then the dead lock expires with its lease and the same join on the restarted agent answers in-progress, then promotes: one member', async () => {
    const spec = await cluster().reserveMember('etcd-3');
    const members = await cluster().listMembers();
    const target = cluster().members.find((m) => members.some((x) => x.name === m.name && m.state === 'running')) as { clientURL: string };
    const proxy = await TcpProxy.start(target.clientURL);
    proxies.push(proxy);
    const dying = await podAgent(proxy);
    dying.onLine(
      (l) => l.message === 'membership change' && l.what === 'add' && l.outcome === 'done',
      () => {
        proxy.freeze();
        void dying.kill('SIGKILL');
      },
    );
    const body = { name: 'etcd-3', peerURLs: [spec.peerURL] };

    const first = await settled(post(dying.url, JOIN, body, 20_000));
    await dying.exited;
    const killedAt = Date.now();

    expect(first).toEqual({ failed: expect.stringMatching(/socket hang up|ECONNRESET/) });
    expect((await cluster().listMembers()).filter((m) => m.peerURLs.includes(spec.peerURL))).toHaveLength(1);
    const records = (await get(observer, '/v1/operations')).json.operations;
    expect(records).toEqual([
      {
        id: expect.any(String),
        action: 'memberJoin',
        member: { name: 'etcd-3', peerURLs: [spec.peerURL] },
        agent: 'etcd-0',
        startedAt: expect.any(String),
        step: 'sending add',
      },
    ]);

    const restarted = await podAgent();
    const again = await post(restarted.url, JOIN, body);

    expect(again.status).toBe(202);
    expect(again.json).toMatchObject({ outcome: 'in-progress', phase: 'unstarted', member: { peerURLs: [spec.peerURL] } });
    expect(await restarted.counter('etcd_agent_membership_changes_total', 'kind="add"')).toBe(0);

    // Nobody took the dead agent's lock over (the join needed none): it expires with its lease, which
    // its last keep-alive, before the kill, renewed for LOCK_LEASE_MS (docs/api.md §4 Calling again).
    await eventually(async () => expect((await get(observer, '/v1/operations')).json.operations).toEqual([]), {
      within: 30_000,
      every: 250,
    });
    expect(Date.now() - killedAt).toBeLessThanOrEqual(LOCK_LEASE_MS + LEASE_EXPIRY_MS);

    await cluster().addMemberProcess('etcd-3', { wait: false });
    const done = await post(restarted.url, JOIN, { ...body, wait: true, timeoutSeconds: 30 });

    expect(done.status).toBe(200);
    expect(['promoted', 'already-member']).toContain(done.json.outcome);
    expect((await cluster().listMembers()).filter((m) => m.peerURLs.includes(spec.peerURL))).toEqual([
      expect.objectContaining({ name: 'etcd-3', isLearner: false, started: true }),
    ]);
    expect(await restarted.counter('etcd_agent_membership_changes_total', 'kind="add"')).toBe(0);
  });
});
