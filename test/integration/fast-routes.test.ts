/**
 * The fast routes (agent/server/fast-routes.ts) against express serving the same route: a plain
 * `GET /v1/health` is answered without express, `GET /v1/health/` (a trailing slash, which express
 * serves the same way) through it. Both must give the same answer — status, headers, body but for
 * its requestId and ageMs — and the same contract promises: an X-Request-Id equal to the body's,
 * one request log line with it, the request counted in the metrics. Against a real 3-member etcd.
 */
import { loadConfig } from '../../agent/config/config';
import { RunningAgent, startAgent } from '../../agent/agent';
import { createLogger } from '../../agent/observability/logger';
import { createMetrics, Metrics } from '../../agent/observability/metrics';
import { withCluster } from '../helpers/etcd-cluster';
import { Answer, call } from '../helpers/http-call';
import { captureLogs } from '../helpers/log-capture';
import { eventually, patience } from '../helpers/eventually';

/** Headers a server may vary per answer, and those Node itself adds. */
const VARYING = new Set(['date', 'x-request-id', 'content-length', 'connection', 'keep-alive']);

function stableHeaders(answer: Answer): Record<string, unknown> {
  return Object.fromEntries(Object.entries(answer.headers).filter(([name]) => !VARYING.has(name)));
}

/** The body without what differs between two requests of one observation. */
function stableBody(answer: Answer): Record<string, unknown> {
  const rest = { ...(answer.json as Record<string, unknown>) };
  delete rest.requestId;
  delete rest.ageMs;
  return rest;
}

async function requestsCounted(metrics: Metrics, route: string): Promise<number> {
  const values = (await metrics.httpRequests.get()).values.filter((v) => v.labels.route === route);
  return values.reduce((sum, v) => sum + v.value, 0);
}

/** The request counter and the duration histogram's count for one method, route and code: [counter, histogram]. */
async function recorded(metrics: Metrics, labels: { method: string; route: string; code: string }): Promise<[number, number]> {
  const same = (l: Record<string, unknown>): boolean => l.method === labels.method && l.route === labels.route && l.code === labels.code;
  const counter = (await metrics.httpRequests.get()).values.find((v) => same(v.labels));
  const histogram = (await metrics.httpRequestDuration.get()).values.find(
    (v) => v.metricName === 'etcd_agent_http_request_duration_seconds_count' && same(v.labels),
  );
  return [counter?.value ?? 0, histogram?.value ?? 0];
}

describe('the fast routes against express serving the same routes, on a real 3-member etcd', () => {
  const cluster = withCluster(3);
  let agent: RunningAgent;
  let metrics: Metrics;
  const logs = captureLogs();

  beforeAll(async () => {
    const { config } = loadConfig({
      ETCD_AGENT_LISTEN: '127.0.0.1:0',
      ETCD_AGENT_ENDPOINTS: cluster().clientURLs().join(','),
      ETCD_AGENT_LOCAL_ENDPOINT: cluster().members[0].clientURL,
      ETCD_AGENT_MEMBER_NAME: cluster().members[0].name,
      // Long enough that both requests of a pair are served from one observation.
      ETCD_AGENT_HEALTH_MAX_AGE_MS: '5000',
      ETCD_AGENT_STATUS_TIMEOUT_MS: '1000',
    });
    metrics = createMetrics({ defaultMetrics: false });
    agent = await startAgent(config, { logger: createLogger({ level: 'info', stream: logs.stream }), metrics });
  }, patience(30_000));

  afterAll(async () => {
    await agent?.stop(2000);
  });

  /**
   * `fast` then `slow`, served from one observation. The agent refreshes an observation ahead of its
   * expiry, and a refresh that finishes between the two requests gives them different observations,
   * which proves nothing about the routes: pairs are asked until one shares its observedAt.
   */
  async function pairOfOneObservation(fast: string, slow: string): Promise<[Answer, Answer]> {
    const stamps = (a: Answer): string => (a.text.match(/"observedAt":"[^"]*"/g) ?? []).join();
    return eventually(
      async () => {
        const pair: [Answer, Answer] = [await call(agent.listening.url, { path: fast }), await call(agent.listening.url, { path: slow })];
        return stamps(pair[0]) === stamps(pair[1]) ? pair : false;
      },
      { within: 30_000, every: 0 },
    );
  }

  it.each(['/v1/health', '/v1/health/local', '/livez', '/readyz'])(
    'when %s is asked plainly and with a trailing slash, then both answers are the same but for the request id and age',
    async (path) => {
      const [fast, slow] = await pairOfOneObservation(path, `${path}/`);

      expect(fast.status).toBe(200);
      expect(slow.status).toBe(fast.status);
      expect(stableHeaders(fast)).toEqual(stableHeaders(slow));
      expect(fast.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(Number(fast.headers['content-length'])).toBe(Buffer.byteLength(fast.text));
      expect(stableBody(fast)).toEqual(stableBody(slow));
    },
  );

  it('when /v1/health/local?voter=true is asked, then the fast answer is the one express gives to the same query with a trailing slash', async () => {
    const [fast, slow] = await pairOfOneObservation('/v1/health/local?voter=true', '/v1/health/local/?voter=true');

    expect(fast.status).toBe(200);
    expect(slow.status).toBe(fast.status);
    expect(stableHeaders(fast)).toEqual(stableHeaders(slow));
    expect(stableBody(fast)).toEqual(stableBody(slow));
  });

  it('when /v1/health is served twice from one observation, then each body is exactly JSON.stringify of its own fields', async () => {
    const [first, second] = await pairOfOneObservation('/v1/health', '/v1/health');

    expect(second.json.observedAt).toBe(first.json.observedAt);
    for (const answer of [first, second]) {
      expect(answer.text).toBe(JSON.stringify(answer.json));
      expect(Object.keys(answer.json).slice(0, 5)).toEqual(['requestId', 'status', 'observedAt', 'ageMs', 'quorum']);
    }
    expect(second.json.requestId).not.toBe(first.json.requestId);
  });

  it('when a fast route answers, then its X-Request-Id is the body id, one request log line carries it, and the metrics count it', async () => {
    const before = await requestsCounted(metrics, '/v1/health');
    const answer = await call(agent.listening.url, { path: '/v1/health', headers: { 'X-Request-Id': 'fast-route-check-1' } });

    expect(answer.headers['x-request-id']).toBe('fast-route-check-1');
    expect(answer.json.requestId).toBe('fast-route-check-1');
    expect(answer.headers['cache-control']).toBe('no-store');
    const lines = logs
      .text()
      .split('\n')
      .filter((l) => l.includes('"fast-route-check-1"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ message: 'request', method: 'GET', path: '/v1/health', status: 200, requestId: 'fast-route-check-1' });
    expect(await requestsCounted(metrics, '/v1/health')).toBe(before + 1);
  });

  it('when a fast route and its express twin answer, then each is recorded alike: the request counter and the duration histogram, by method, route and code', async () => {
    const labels = { method: 'GET', route: '/v1/health', code: '200' };
    const [counted, timed] = await recorded(metrics, labels);
    const fast = await call(agent.listening.url, { path: '/v1/health' });
    expect(fast.status).toBe(200);
    expect(await recorded(metrics, labels)).toEqual([counted + 1, timed + 1]);
    const slow = await call(agent.listening.url, { path: '/v1/health/' });
    expect(slow.status).toBe(200);
    expect(await recorded(metrics, labels)).toEqual([counted + 2, timed + 2]);
  });

  it('when /metrics is scraped plainly, then it answers the Prometheus text with the contract metrics', async () => {
    const fast = await call(agent.listening.url, { path: '/metrics' });
    const slow = await call(agent.listening.url, { path: '/metrics/' });

    expect(fast.status).toBe(200);
    expect(fast.headers['content-type']).toBe(slow.headers['content-type']);
    expect(fast.text).toContain('etcd_agent_cluster_healthy');
    expect(fast.text).toContain('etcd_agent_http_requests_total');
  });
});
