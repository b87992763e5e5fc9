/**
 * `/v1/health` with one of three members frozen (SIGSTOP), against real etcd: the agent beside it is
 * configured with that member only (the default). Every observation then waits out the frozen
 * member's status timeout; refreshed ahead of expiry, the shared observation still answers a probe
 * rate of callers at once (issue #11: p99 ≤ 50 ms at 10 req/s), and never says `healthy`.
 */
import type { RunningAgent } from '../../agent/agent';
import { eventually, withCluster } from '../helpers/etcd-cluster';
import { get, startMemberAgent } from '../helpers/membership';

describe('/v1/health while a member is paused', () => {
  const cluster = withCluster(3);
  let agent: RunningAgent;

  beforeAll(async () => {
    agent = await startMemberAgent(cluster(), 'etcd-0', { ETCD_AGENT_ENDPOINTS: cluster().member('etcd-0').clientURL });
  });

  afterAll(async () => {
    await agent?.stop(100);
  });

  it('when the member beside the agent is paused, then /v1/health at 10 req/s answers with p99 ≤ 50 ms and never healthy', async () => {
    await eventually(async () => {
      const answer = await get(agent, '/v1/health');
      if (answer.json.status !== 'healthy') throw new Error(`not yet healthy: ${answer.text.slice(0, 300)}`);
    });
    cluster().pause('etcd-0');
    try {
      // The cluster notices: a new leader if it led, and the agent's observations time its status out.
      await eventually(async () => {
        const answer = await get(agent, '/v1/health');
        if (answer.json.status !== 'degraded') throw new Error(`not yet degraded: ${answer.text.slice(0, 300)}`);
      }, 10_000, 100);

      const latencies: number[] = [];
      const statuses: string[] = [];
      const calls: Array<Promise<void>> = [];
      for (let i = 0; i < 100; i++) {
        const t0 = performance.now();
        calls.push(
          get(agent, '/v1/health').then((answer) => {
            latencies.push(performance.now() - t0);
            statuses.push(answer.json.status);
          }),
        );
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      await Promise.all(calls);

      latencies.sort((a, b) => a - b);
      const p50 = latencies[49];
      const p99 = latencies[98];
      process.stdout.write(`paused member: /v1/health p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${latencies[99].toFixed(1)} ms, statuses ${[...new Set(statuses)].join(',')}\n`);
      expect(statuses).not.toContain('healthy');
      expect(statuses.filter((s) => s !== 'degraded')).toEqual([]);
      expect(p99).toBeLessThanOrEqual(50);
    } finally {
      cluster().resume('etcd-0');
    }
  }, 40_000);
});
