/**
 * Membership changes under etcd's NOSPACE alarm, against a real 3-member etcd with a small
 * `--quota-backend-bytes`: etcd then refuses every put, the agent's membership lock included, so no
 * change can be made. The answer must say so and what to do (reclaim space: compact, defrag,
 * disarm), not a bare "unavailable"; once space is reclaimed, the same call works.
 */
import type { RunningAgent } from '../../agent/agent';
import { fillUntilNoSpace, withCluster } from '../helpers/etcd-cluster';
import { changesSent, etcdAcceptsChanges, get, post, startMemberAgent, until } from '../helpers/membership';
import { patience } from '../helpers/eventually';

const LEAVE = '/v1/members/leave';

describe('membership changes under a NOSPACE alarm', () => {
  const cluster = withCluster(3, { extraArgs: ['--quota-backend-bytes=3000000'] });
  let agent: RunningAgent;

  beforeAll(async () => {
    agent = await startMemberAgent(cluster(), 'etcd-0', { ETCD_AGENT_ENDPOINTS: cluster().member('etcd-0').clientURL });
    await etcdAcceptsChanges(cluster());
  }, patience(20_000));

  afterAll(async () => {
    await agent?.stop(2000);
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

  it("when the alarm is raised, then /v1/health shows it from the Alarm RPC; etcd's own /health fails naming it from 3.5, and /readyz (3.5.11+) does not", async () => {
    const url = cluster().member('etcd-0').clientURL;
    // An observation that did not finish within its budget answers `unknown`, and one whose Alarm RPC
    // did not answers without the alarm list (`alarm list: …` in errors): a complete one must show it.
    const health = await until(
      () => get(agent, '/v1/health'),
      (a) => a.json.status !== 'unknown' && !(a.json.errors as string[]).some((e) => e.startsWith('alarm list:')),
    );
    expect(health.json).toMatchObject({
      status: 'degraded',
      alarms: expect.arrayContaining([expect.objectContaining({ alarm: 'NOSPACE' })]),
    });
    // etcd's words in Status errors, shown per member and never parsed: 3.4–3.6 print them with gogo's
    // String() (a trailing space), 3.7 with protobuf-go's text format, whose spacing is unstable on purpose.
    const status = await agent.cluster.memberStatus(url, 2000);
    const { version, minor } = cluster().etcd;
    process.stdout.write(`etcd ${version} Status errors under NOSPACE: ${JSON.stringify(status.errors)}\n`);
    expect(status.errors).toEqual([
      expect.stringMatching(minor === '3.7' ? /^memberID:\s*\d+\s+alarm:\s*NOSPACE$/ : /^memberID:\d+ alarm:NOSPACE $/),
    ]);

    const [own, ready] = await Promise.all(
      ['/health', '/readyz'].map(async (p) => {
        const res = await fetch(`${url}${p}`);
        return { status: res.status, body: (await res.text()).trim() };
      }),
    );
    process.stdout.write(`etcd ${version} under NOSPACE: /health ${own.status} ${own.body}; /readyz ${ready.status} ${ready.body}\n`);
    if (minor === '3.4') {
      expect(own).toEqual({ status: 503, body: '{"health":"false"}' });
      expect(ready.status).toBe(404);
    } else {
      expect(own).toEqual({ status: 503, body: '{"health":"false","reason":"ALARM NOSPACE"}' });
      expect(ready.status).toBe(200);
    }
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
