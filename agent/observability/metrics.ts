/**
 * prom-client metrics (CONTRACT §4 GET /metrics). Each app gets its own
 * Registry, so tests and several agents in one process never share counters.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Every metric the agent exposes, bound to one registry. */
export interface Metrics {
  registry: Registry;
  actionsTotal: Counter<'action' | 'outcome'>;
  actionDuration: Histogram<'action'>;
  membershipChanges: Counter<'kind'>;
  clusterHealthy: Gauge;
  quorumHealthyVoters: Gauge;
  quorumVoters: Gauge;
  healthObservationAge: Gauge;
  healthObservations: Counter<'result'>;
  statusRpcs: Counter;
  memberReachable: Gauge<'member'>;
  httpRequests: Counter<'method' | 'route' | 'status'>;
  /** Brings the health gauges up to date when a scrape reads them (set by the health observer). */
  healthScrape: HealthScrapeHook;
}

/**
 * Called by the health gauges' `collect()` at scrape time. The health observer sets `refresh` so
 * that a scrape shows a fresh observation (shared with /v1/health), never a stale "healthy".
 */
export interface HealthScrapeHook {
  refresh: () => Promise<void>;
}

/** Creates a fresh registry with the agent's metrics and Node's default process metrics. */
export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const healthScrape: HealthScrapeHook = { refresh: async () => undefined };
  // Each gauge awaits the refresh itself: prom-client reads all metrics of a scrape in parallel.
  const collect = (): Promise<void> => healthScrape.refresh();
  return {
    registry,
    actionsTotal: new Counter({
      name: 'etcd_agent_actions_total',
      help: 'Lifecycle actions answered, by action and outcome (or error code).',
      labelNames: ['action', 'outcome'] as const,
      registers,
    }),
    actionDuration: new Histogram({
      name: 'etcd_agent_action_duration_seconds',
      help: 'Time to answer a lifecycle action.',
      labelNames: ['action'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    membershipChanges: new Counter({
      name: 'etcd_agent_membership_changes_total',
      help: 'Membership RPCs actually sent to etcd (add, remove, promote, move-leader).',
      labelNames: ['kind'] as const,
      registers,
    }),
    clusterHealthy: new Gauge({
      name: 'etcd_agent_cluster_healthy',
      help: '1 when the last observation was healthy, else 0.',
      registers,
      collect,
    }),
    quorumHealthyVoters: new Gauge({
      name: 'etcd_agent_quorum_healthy_voters',
      help: 'Voters that answered a status call and agree on the leader, in the last observation.',
      registers,
      collect,
    }),
    quorumVoters: new Gauge({
      name: 'etcd_agent_quorum_voters',
      help: 'Voting members in the last observation.',
      registers,
      collect,
    }),
    healthObservationAge: new Gauge({
      name: 'etcd_agent_health_observation_age_seconds',
      help: 'Age of the newest finished health observation.',
      registers,
      collect,
    }),
    healthObservations: new Counter({
      name: 'etcd_agent_health_observations_total',
      help: 'Health observations made, by resulting status.',
      labelNames: ['result'] as const,
      registers,
    }),
    statusRpcs: new Counter({
      name: 'etcd_agent_status_rpcs_total',
      help: 'Maintenance.Status RPCs sent to etcd members.',
      registers,
    }),
    memberReachable: new Gauge({
      name: 'etcd_agent_member_reachable',
      help: '1 when the member answered a status call in the last observation, else 0.',
      labelNames: ['member'] as const,
      registers,
      collect,
    }),
    httpRequests: new Counter({
      name: 'etcd_agent_http_requests_total',
      help: 'HTTP requests answered, by method, route and status.',
      labelNames: ['method', 'route', 'status'] as const,
      registers,
    }),
    healthScrape,
  };
}
