/**
 * Membership changes under etcd's NOSPACE alarm, against a real 3-member etcd with a small
 * `--quota-backend-bytes`: etcd then refuses every put, the agent's membership lock included, so no
 * change can be made. The answer must say so and what to do (reclaim space: compact, defrag,
 * disarm), not a bare "unavailable"; once space is reclaimed, the same call works.
 */
import type { RunningAgent } from '../../agent/agent';
import { fillUntilNoSpace, withCluster } from '../helpers/etcd-cluster';
import { changesSent, post, settle, startMemberAgent } from '../helpers/membership';

const LEAVE = '/v1/members/leave';

describe('membership changes under a NOSPACE alarm', () => {
  const started = Date.now();
  const cluster = withCluster(3, { extraArgs: ['--quota-backend-bytes=3000000'] });
  let agent: RunningAgent;

  beforeAll(async () => {
    agent = await startMemberAgent(cluster(), 'etcd-0', { ETCD_AGENT_ENDPOINTS: cluster().member('etcd-0').clientURL });
    await settle(started);
  }, 20_000);

  afterAll(async () => {
    await agent?.stop(100);
  });

  it('when the backend quota is exceeded, then a leave answers 503 naming the NOSPACE alarm and the remedy, and changes nothing', async () => {
    const refused = await fillUntilNoSpace((key, value) => agent.cluster.raw.put(key).value(value).exec());
    expect(String(refused)).toMatch(/database space exceeded/);
    expect(await cluster().etcdctl(['alarm', 'list'])).toMatch(/NOSPACE/);

    const reply = await post(agent, LEAVE, { name: 'etcd-2' });

    expect(reply.status).toBe(503);
    expect(reply.json.error).toMatchObject({ code: 'unavailable', retryable: true, details: { alarm: 'NOSPACE' } });
    expect(reply.json.error.message).toMatch(/NOSPACE/);
    expect(reply.json.error.message).toMatch(/compact.*defrag.*alarm disarm/);
    expect(await changesSent(agent.metrics)).toMatchObject({ remove: 0 });
    expect((await cluster().listMembers()).map((m) => m.name).sort()).toEqual(['etcd-0', 'etcd-1', 'etcd-2']);
  });

  it('when space is reclaimed as the answer says (delete, compact, defrag, disarm), then the same leave removes the member', async () => {
    await cluster().etcdctl(['del', 'big/', '--prefix']);
    const status = await cluster().etcdctl(['endpoint', 'status', '-w', 'json']);
    const revision = /"revision":(\d+)/.exec(status)?.[1] as string;
    await cluster().etcdctl(['compact', revision]);
    await cluster().etcdctl(['defrag']);
    await cluster().etcdctl(['alarm', 'disarm']);

    const reply = await post(agent, LEAVE, { name: 'etcd-2' });

    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ outcome: 'removed', member: { name: 'etcd-2' } });
  });
});
