/**
 * Join and leave of a 4th member against a real 3-member etcd, through the
 * agent's HTTP API: the KubeBlocks incident (a join replayed after its answer
 * was lost) must answer in-progress, never "member already exists".
 */
import type { RunningAgent } from '../../agent/agent';
import { withCluster, type MemberSpec } from '../helpers/etcd-cluster';
import { actionsAnswered, changesSent, etcdAcceptsChanges, get, post, startMemberAgent, until } from '../helpers/membership';
import { patience } from '../helpers/eventually';

const JOIN = '/v1/members/join';
const LEAVE = '/v1/members/leave';

describe('joining and leaving a 4th member', () => {
  const cluster = withCluster(3);
  let agent: RunningAgent;
  let etcd3: MemberSpec;

  beforeAll(async () => {
    agent = await startMemberAgent(cluster(), 'etcd-0');
    etcd3 = await cluster().reserveMember('etcd-3');
    await etcdAcceptsChanges(cluster());
    // The agent has seen every member answer once (its connections made), as a readiness probe would
    // make it, so that no call under test spends its Status budget (500 ms) on making them.
    await until(
      () => get(agent, '/v1/health'),
      (a) => a.json.status === 'healthy',
    );
  }, patience(30_000));

  afterAll(async () => {
    await agent?.stop(2000);
  });

  it('when the 4th member is joined twice before its etcd starts, then the first call adds it as a learner (202 added) and the second answers in-progress without a second MemberAdd', async () => {
    const first = await post(agent, JOIN, { name: 'etcd-3', peerURLs: [etcd3.peerURL] });
    const second = await post(agent, JOIN, { name: 'etcd-3', peerURLs: [etcd3.peerURL] });

    expect(first.status).toBe(202);
    expect(Object.keys(first.json).sort()).toEqual(
      ['action', 'cluster', 'complete', 'durationMs', 'leaderTransferred', 'member', 'outcome', 'phase', 'requestId'].sort(),
    );
    expect(first.json).toMatchObject({
      requestId: first.headers['x-request-id'],
      action: 'memberJoin',
      outcome: 'added',
      complete: false,
      phase: 'unstarted',
      member: { name: '', peerURLs: [etcd3.peerURL], clientURLs: [], isLearner: true, started: false },
      cluster: { members: 4, voters: 3, learners: 1 },
      leaderTransferred: false,
    });
    expect(first.json.member.id).toMatch(/^[0-9a-f]+$/);
    expect(second.status).toBe(202);
    expect(second.json).toMatchObject({
      outcome: 'in-progress',
      complete: false,
      phase: 'unstarted',
      member: { id: first.json.member.id },
    });
    expect(await changesSent(agent.metrics)).toEqual({ add: 1, remove: 0, promote: 0, 'move-leader': 0 });
    const listed = (await cluster().listMembers()).filter((m) => m.peerURLs.includes(etcd3.peerURL));
    expect(listed).toHaveLength(1);
    expect(await actionsAnswered(agent.metrics)).toMatchObject({ 'memberJoin added': 1, 'memberJoin in-progress': 1 });
  });

  it('when its etcd starts and join is called with wait: true, then this call promotes it (200 promoted) and the list holds exactly one voter with that peer URL', async () => {
    await cluster().addMemberProcess('etcd-3', { wait: false });

    const reply = await post(agent, JOIN, { name: 'etcd-3', peerURLs: [etcd3.peerURL], wait: true, timeoutSeconds: 30 });

    expect(reply.status).toBe(200);
    // Nobody else promotes etcd-3 here (it has no agent of its own), so this call is the one that does.
    expect(reply.json.outcome).toBe('promoted');
    expect(reply.json).toMatchObject({ complete: true, phase: 'voter', member: { name: 'etcd-3', isLearner: false, started: true } });
    expect(reply.json.cluster).toMatchObject({ members: 4, voters: 4, learners: 0 });
    const withUrl = (await cluster().listMembers()).filter((m) => m.peerURLs.includes(etcd3.peerURL));
    expect(withUrl).toEqual([expect.objectContaining({ name: 'etcd-3', isLearner: false, started: true })]);
    expect((await changesSent(agent.metrics)).add).toBe(1);
    expect((await changesSent(agent.metrics)).promote).toBeGreaterThanOrEqual(1);
  });

  it('when it is joined again, then it answers already-member and sends no membership RPC', async () => {
    const before = await changesSent(agent.metrics);

    const reply = await post(agent, JOIN, { name: 'etcd-3', peerURLs: [etcd3.peerURL] });

    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ outcome: 'already-member', complete: true, phase: 'voter' });
    expect(await changesSent(agent.metrics)).toEqual(before);
  });

  it('when another name claims its peer URL, or its name comes with another peer URL, then 409 conflict and nothing is sent', async () => {
    const before = await changesSent(agent.metrics);

    const otherName = await post(agent, JOIN, { name: 'etcd-9', peerURLs: [etcd3.peerURL] });
    const otherUrl = await post(agent, JOIN, { name: 'etcd-3', peerURLs: ['http://127.0.0.1:1'] });

    expect(otherName.status).toBe(409);
    expect(otherName.json.error).toMatchObject({ code: 'conflict', retryable: false });
    expect(otherName.json.error.message).toContain('etcd-3');
    expect(otherUrl.status).toBe(409);
    expect(otherUrl.json.error.code).toBe('conflict');
    expect(await changesSent(agent.metrics)).toEqual(before);
  });

  it('when a join would have to add a member but names no peer URL and no template is set, then 400 "no peer URL for etcd-9"', async () => {
    const reply = await post(agent, JOIN, { name: 'etcd-9' });

    expect(reply.status).toBe(400);
    expect(reply.json.error).toMatchObject({ code: 'bad-request', message: expect.stringContaining('no peer URL for etcd-9') });
  });

  it('when a body carries an unknown field, then 400 bad-request naming it', async () => {
    const reply = await post(agent, LEAVE, { name: 'etcd-3', froce: true });

    expect(reply.status).toBe(400);
    expect(reply.json.error.code).toBe('bad-request');
    expect(reply.json.error.message).toContain('froce');
  });

  it('when the members are listed, then GET /v1/members answers the linearizable list with its summary', async () => {
    const reply = await get(agent, '/v1/members');

    expect(reply.status).toBe(200);
    expect(reply.json.cluster).toMatchObject({ members: 4, voters: 4, learners: 0 });
    expect(reply.json.members.map((m: { name: string }) => m.name).sort()).toEqual(['etcd-0', 'etcd-1', 'etcd-2', 'etcd-3']);
    expect((await get(agent, '/v1/operations')).json).toEqual({ requestId: expect.any(String), operations: [] });
  });

  it('when its etcd is stopped and it is asked to leave twice, then removed (without asking it) and then already-absent', async () => {
    await cluster().stop('etcd-3');

    const first = await post(agent, LEAVE, { name: 'etcd-3', peerURLs: [etcd3.peerURL] });
    const second = await post(agent, LEAVE, { name: 'etcd-3', peerURLs: [etcd3.peerURL] });

    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({
      action: 'memberLeave',
      outcome: 'removed',
      complete: true,
      member: { name: 'etcd-3' },
      cluster: { members: 3, voters: 3, learners: 0 },
      leaderTransferred: false,
    });
    expect(second.status).toBe(200);
    expect(second.json).toMatchObject({ outcome: 'already-absent', complete: true, cluster: { members: 3 } });
    expect((await changesSent(agent.metrics)).remove).toBe(1);
    expect((await cluster().listMembers()).map((m) => m.name).sort()).toEqual(['etcd-0', 'etcd-1', 'etcd-2']);
  });

  it('when a member is joined again right after it left, with the same peer URL, then every join adds it (etcd would reuse the removed id within the same second)', async () => {
    const peerURLs = ['http://127.0.0.1:2'];

    for (let round = 0; round < 3; round++) {
      const joined = await post(agent, JOIN, { name: 'etcd-8', peerURLs });
      const left = await post(agent, LEAVE, { name: 'etcd-8', peerURLs });

      expect([joined.status, joined.json.outcome]).toEqual([202, 'added']);
      expect([left.status, left.json.outcome]).toEqual([200, 'removed']);
    }
    expect((await cluster().listMembers()).map((m) => m.name).sort()).toEqual(['etcd-0', 'etcd-1', 'etcd-2']);
  });
});
