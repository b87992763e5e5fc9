/**
 * `/v1/health` with one of three members frozen (SIGSTOP), against real etcd: the agent, run as its
 * own process as in a pod, is configured with that member only (the default). Every observation then
 * waits out the frozen member's status timeout, and callers at a probe rate share those
 * observations: the agent still finds the other members, never says `healthy`, and the observations
 * it makes follow the clock, not the callers.
 *
 * How fast those callers are answered is a latency, the bench's figure (scripts/bench/promptness.ts:
 * the p99 with the member frozen against the p99 with every member up, in the same run).
 */
import { ChildAgent, MAIN_JS } from '../helpers/child-agent';
import { withCluster } from '../helpers/etcd-cluster';
import { eventually } from '../helpers/eventually';
import { get } from '../helpers/membership';

const MAX_AGE_MS = 1000; // ETCD_AGENT_HEALTH_MAX_AGE_MS default
const STATUS_TIMEOUT_MS = 500; // ETCD_AGENT_STATUS_TIMEOUT_MS default: each observation waits it out on the frozen member
/** Observations in flight at once at most, while each takes more than half the max age (agent/health/shared-observation.ts). */
const MAX_FLIGHTS = 3;

/** One answer of the probe-rate callers. */
interface Probe {
  sentAt: number;
  at: number;
  status: string;
  observedAt?: number;
  ageMs?: number;
  frozenReachable?: boolean;
}

describe('/v1/health while a member is paused', () => {
  const cluster = withCluster(3);
  let agent: ChildAgent | undefined;

  beforeAll(async () => {
    const own = cluster().member('etcd-0');
    agent = await ChildAgent.start(MAIN_JS, {
      ETCD_AGENT_MEMBER_NAME: 'etcd-0',
      ETCD_AGENT_ENDPOINTS: own.clientURL,
      ETCD_AGENT_LOCAL_ENDPOINT: own.clientURL,
      ETCD_AGENT_LOG_LEVEL: 'info',
    });
  });

  afterAll(async () => {
    await agent?.kill('SIGTERM');
  });

  /** 100 calls at 10 req/s, each sent without waiting for the ones before (as probes of several callers are). */
  async function probes(url: string): Promise<Probe[]> {
    const calls: Array<Promise<Probe>> = [];
    for (let i = 0; i < 100; i++) {
      const sentAt = Date.now();
      calls.push(
        get(url, '/v1/health').then((answer) => {
          const frozen = (answer.json.members as Array<{ name: string; reachable: boolean }> | undefined)?.find((m) => m.name === 'etcd-0');
          return {
            sentAt,
            at: Date.now(),
            status: String(answer.json.status),
            ...(typeof answer.json.observedAt === 'string' ? { observedAt: Date.parse(answer.json.observedAt) } : {}),
            ...(typeof answer.json.ageMs === 'number' ? { ageMs: answer.json.ageMs } : {}),
            ...(frozen === undefined ? {} : { frozenReachable: frozen.reachable }),
          };
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return Promise.all(calls);
  }

  it('when the member beside the agent is paused, then callers at 10 req/s share observations that never say healthy and always see it unreachable', async () => {
    const url = (agent as ChildAgent).url;
    await eventually(
      async () => {
        const answer = await get(url, '/v1/health');
        if (answer.json.status !== 'healthy') throw new Error(`not yet healthy: ${answer.text.slice(0, 300)}`);
      },
      { within: 10_000 },
    );
    cluster().pause('etcd-0');
    const pausedAt = Date.now();
    try {
      // The cluster notices: a new leader if it led, and the agent finds the other members itself.
      await eventually(
        async () => {
          const answer = await get(url, '/v1/health');
          if (answer.json.status !== 'degraded' || Date.parse(answer.json.observedAt) < pausedAt)
            throw new Error(`not yet degraded since the pause: ${answer.text.slice(0, 300)}`);
        },
        { within: 10_000, every: 100 },
      );

      const observationsBefore = await (agent as ChildAgent).counter('etcd_agent_health_observations_total', '');
      const started = Date.now();
      const answers = await probes(url);
      const elapsedMs = Date.now() - started;
      const observations = (await (agent as ChildAgent).counter('etcd_agent_health_observations_total', '')) - observationsBefore;
      const counts: Record<string, number> = {};
      for (const a of answers) counts[a.status] = (counts[a.status] ?? 0) + 1;
      process.stdout.write(`paused member: ${JSON.stringify(counts)} in ${elapsedMs} ms from ${observations} observations\n`);

      // Never healthy, and no observation begun since the pause heard the frozen member; an answer
      // short of degraded says the others were slow too (unavailable) or none finished in time (unknown).
      expect(answers.filter((a) => !['degraded', 'unavailable', 'unknown'].includes(a.status))).toEqual([]);
      expect(answers.filter((a) => a.observedAt !== undefined && a.observedAt >= pausedAt && a.frozenReachable !== false)).toEqual([]);
      expect(answers.filter((a) => a.ageMs !== undefined && a.ageMs > MAX_AGE_MS)).toEqual([]);
      expect(counts.degraded).toBeGreaterThan(0);
      // Callers share observations (docs/api.md §4): each one lasts the frozen member's status timeout and
      // at most a few overlap, so their number follows the clock, not the 100 callers. `elapsedMs` is
      // measured, so a slow machine only loosens the bound.
      expect(observations).toBeLessThanOrEqual(MAX_FLIGHTS * (Math.ceil(elapsedMs / STATUS_TIMEOUT_MS) + 1));
      expect(observations).toBeLessThan(answers.length);
    } finally {
      cluster().resume('etcd-0');
    }
  });
});
