/**
 * One membership change at a time, cluster-wide, against a real 3-member etcd:
 * the lock and its operation records, identical calls sharing one execution,
 * two agents joining two members at once, and a learner's own pod agent
 * promoting it with nobody calling again.
 */
import type { RunningAgent } from '../../agent/agent';
import { Deadline } from '../../agent/lib/deadline';
import { EtcdCluster } from '../../agent/etcd/cluster-client';
import { MembershipLock } from '../../agent/etcd/lock';
import { createLogger } from '../../agent/observability/logger';
import { withCluster, type MemberSpec } from '../helpers/etcd-cluster';
import { eventually } from '../helpers/eventually';
import { actionsAnswered, changesSent, etcdAcceptsChanges, get, post, startMemberAgent } from '../helpers/membership';

const JOIN = '/v1/members/join';
const PROMOTE = '/v1/members/promote';
const PREFIX = '/etcd-lifecycle-agent/';

describe('concurrent membership changes', () => {
  const cluster = withCluster(3);
  const agents: RunningAgent[] = [];
  const clients: EtcdCluster[] = [];
  let agent0: RunningAgent;

  /** Another agent's lock, taken through a client of its own (so the agent under test does not hold it). */
  function otherLock(agent: string): MembershipLock {
    const client = new EtcdCluster({ endpoints: cluster().clientURLs() });
    clients.push(client);
    return new MembershipLock(client, { keyPrefix: PREFIX, agent, logger: createLogger({ silent: true }) });
  }

  beforeAll(async () => {
    agent0 = await startMemberAgent(cluster(), 'etcd-0');
    agents.push(agent0);
  });

  afterAll(async () => {
    await Promise.all(agents.map((a) => a.stop(2000)));
    clients.forEach((c) => c.close());
  });

  it('when another agent holds the lock, then GET /v1/operations lists its record and a join waits for it, then answers 409 busy naming it', async () => {
    const lock = otherLock('etcd-2');
    const held = await lock.acquire({ action: 'memberLeave', member: { name: 'etcd-1', peerURLs: [] } }, Deadline.in(5000));
    try {
      await held.setStep('sending remove', Deadline.in(5000));

      const operations = await get(agent0, '/v1/operations');
      const t0 = Date.now();
      const busy = await post(agent0, JOIN, { name: 'etcd-3', peerURLs: ['http://127.0.0.1:1'], timeoutSeconds: 2 });
      const waited = Date.now() - t0;

      expect(operations.json.operations).toEqual([
        {
          id: held.record.id,
          action: 'memberLeave',
          member: { name: 'etcd-1', peerURLs: [] },
          agent: 'etcd-2',
          startedAt: expect.any(String),
          step: 'sending remove',
        },
      ]);
      expect(busy.status).toBe(409);
      expect(busy.json.error).toMatchObject({
        code: 'busy',
        retryable: true,
        message: expect.stringContaining('memberLeave of etcd-1 by agent etcd-2'),
      });
      expect(waited).toBeGreaterThanOrEqual(900);
      expect(waited).toBeLessThan(2500);
    } finally {
      await held.release();
    }
    expect((await get(agent0, '/v1/operations')).json.operations).toEqual([]);
  });

  describe('a new member joined by 20 identical concurrent calls, then promoted by its own pod agent', () => {
    let etcd3: MemberSpec;

    beforeAll(async () => {
      etcd3 = await cluster().reserveMember('etcd-3');
    });

    it('when 20 identical joins of a new member arrive at once, then exactly one MemberAdd is sent and every answer is 2xx added or in-progress', async () => {
      await etcdAcceptsChanges(cluster());
      const before = await changesSent(agent0.metrics);

      const replies = await Promise.all(
        Array.from({ length: 20 }, () => post(agent0, JOIN, { name: 'etcd-3', peerURLs: [etcd3.peerURL] })),
      );

      const listed = (await cluster().listMembers()).filter((m) => m.peerURLs.includes(etcd3.peerURL));
      expect(listed).toHaveLength(1);
      expect((await changesSent(agent0.metrics)).add - before.add).toBe(1);
      // The calls sharing the one add answer added; any that came after it answer in-progress. All name
      // the one learner etcd lists, unstarted.
      const added = replies.filter((r) => r.json.outcome === 'added');
      expect(added.length).toBeGreaterThanOrEqual(1);
      for (const reply of replies) {
        expect(reply.status).toBe(202);
        expect(reply.json).toMatchObject({
          outcome: added.includes(reply) ? 'added' : 'in-progress',
          complete: false,
          phase: 'unstarted',
          member: { id: listed[0].id, isLearner: true },
        });
      }
    });

    it('when a promote names the unstarted learner, then 202 in-progress without a promote RPC; an unknown member is 404', async () => {
      const before = await changesSent(agent0.metrics);

      const unstarted = await post(agent0, PROMOTE, { name: 'etcd-3', peerURLs: [etcd3.peerURL] });
      const unknown = await post(agent0, PROMOTE, { name: 'etcd-42', peerURLs: ['http://127.0.0.1:42'] });

      expect(unstarted.status).toBe(202);
      expect(unstarted.json).toMatchObject({ action: 'memberPromote', outcome: 'in-progress', phase: 'unstarted', complete: false });
      expect(unknown.status).toBe(404);
      expect(unknown.json.error.code).toBe('not-found');
      expect(await changesSent(agent0.metrics)).toEqual(before);
    });

    it("when the learner's etcd starts beside its own agent and nobody calls again, then that agent promotes it to a voter", async () => {
      const podAgent = await startMemberAgent(cluster(), 'etcd-3', { ETCD_AGENT_LOCAL_ENDPOINT: etcd3.clientURL });
      agents.push(podAgent);

      await cluster().addMemberProcess('etcd-3');

      await eventually(
        async () => {
          const m = (await cluster().listMembers()).find((x) => x.name === 'etcd-3');
          expect(m).toMatchObject({ isLearner: false, started: true });
        },
        { within: 20_000 },
      );
      expect((await changesSent(podAgent.metrics)).promote).toBeGreaterThanOrEqual(1);
      // Counted once the pass has answered, which is after it released the lock: moments after etcd shows the voter.
      await eventually(async () => expect(await actionsAnswered(podAgent.metrics)).toMatchObject({ 'memberPromote promoted': 1 }), {
        within: 5000,
      });
      expect((await changesSent(agent0.metrics)).promote).toBe(0);
      const promote = await post(agent0, PROMOTE, { name: 'etcd-3' });
      expect(promote.json).toMatchObject({ outcome: 'already-member', phase: 'voter' });
    });
  });

  it('when two agents join two different new members at once (wait: true), then both end as voters', async () => {
    const agent1 = await startMemberAgent(cluster(), 'etcd-1');
    agents.push(agent1);
    const specs = [await cluster().reserveMember('etcd-4'), await cluster().reserveMember('etcd-5')];

    // Starts each member's etcd as soon as it has been added, as its StatefulSet pod would start.
    let joining = true;
    const starter = (async () => {
      const pending = new Set(specs.map((s) => s.name));
      while (joining && pending.size > 0) {
        const listed = await cluster().listMembers();
        for (const spec of specs) {
          if (pending.has(spec.name) && listed.some((m) => m.peerURLs.includes(spec.peerURL))) {
            pending.delete(spec.name);
            await cluster().addMemberProcess(spec.name, { wait: false });
          }
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    const replies = await Promise.all([
      post(agent0, JOIN, { name: 'etcd-4', peerURLs: [specs[0].peerURL], wait: true, timeoutSeconds: 45 }),
      post(agent1, JOIN, { name: 'etcd-5', peerURLs: [specs[1].peerURL], wait: true, timeoutSeconds: 45 }),
    ]);
    joining = false;
    await starter;

    for (const reply of replies) {
      expect(reply.status).toBe(200);
      // Each member has no agent of its own: the agent that joined it is the one that promotes it.
      expect(reply.json).toMatchObject({ outcome: 'promoted', phase: 'voter' });
    }
    const listed = await cluster().listMembers();
    for (const spec of specs) {
      expect(listed.filter((m) => m.peerURLs.includes(spec.peerURL))).toEqual([
        expect.objectContaining({ name: spec.name, isLearner: false, started: true }),
      ]);
    }
  });
});
