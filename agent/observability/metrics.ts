/**
 * prom-client metrics (docs/api.md §4 GET /metrics). Each app gets its own
 * Registry, so tests and several agents in one process never share counters.
 *
 * The `etcd_agent_cluster_*`, `etcd_agent_quorum_*`, `etcd_agent_operations_*` and
 * `etcd_agent_member_reachable` gauges describe the whole cluster: every sidecar exports the same
 * values, so rules aggregate them (`max by`/`min by`). The observation-derived ones are absent while
 * the observation is `unknown` (health/health-metrics.ts): a slow agent must not look like quorum loss.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { createBackupMetrics, type BackupMetrics } from './backup-metrics';
import { BUILD_INFO } from './build-info';

/** Every metric the agent exposes, bound to one registry. */
export interface Metrics {
  registry: Registry;
  actionsTotal: Counter<'action' | 'outcome'>;
  actionDuration: Histogram<'action'>;
  membershipChanges: Counter<'kind' | 'result'>;
  clusterHealthy: Gauge;
  quorumHealthyVoters: Gauge;
  quorumVoters: Gauge;
  healthObservationAge: Gauge;
  healthObservations: Counter<'result'>;
  statusRpcs: Counter<'result'>;
  memberReachable: Gauge<'member'>;
  httpRequests: Counter<'method' | 'route' | 'code'>;
  httpRequestDuration: Histogram<'method' | 'route' | 'code'>;
  clusterStatus: Gauge<'status'>;
  quorumFaultTolerance: Gauge;
  quorumHasQuorum: Gauge;
  clusterLearners: Gauge;
  clusterMembers: Gauge;
  clusterAlarms: Gauge<'alarm'>;
  operationsInFlight: Gauge;
  operationsOldestAge: Gauge;
  buildInfo: Gauge<'version' | 'node_version'>;
  memberDbSize: Gauge<'member'>;
  memberDbSizeInUse: Gauge<'member'>;
  memberDbQuota: Gauge<'member'>;
  defrags: Counter<'member' | 'result'>;
  defragDbSize: Gauge<'member' | 'when'>;
  defragDbSizeInUse: Gauge<'member' | 'when'>;
  defragDuration: Gauge<'member'>;
  defragRunning: Gauge;
  defragScheduleSkips: Counter<'reason'>;
  applyNudges: Counter<'result'>;
  backup: BackupMetrics;
  /**
   * Registers what brings gauges up to date when a scrape reads them (the health observer does, so
   * a scrape shows a fresh observation, never a stale "healthy"; the maintenance service refreshes
   * the quota gauges); answers the function that unregisters it. Every registration runs at each scrape.
   */
  onScrape(refresh: () => Promise<void>): () => void;
}

/** Creates a fresh registry with the agent's metrics and Node's default process metrics. */
export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const refreshers = new Set<() => Promise<void>>();
  // Each gauge awaits the refreshes itself: prom-client reads all metrics of a scrape in parallel.
  const collect = async (): Promise<void> => {
    await Promise.all([...refreshers].map((refresh) => refresh()));
  };
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
      help: 'Membership RPCs actually sent to etcd (add, remove, promote, move-leader), by result (ok or the error code).',
      labelNames: ['kind', 'result'] as const,
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
      help: 'Maintenance.Status RPCs sent to etcd members, by result (ok or the error code).',
      labelNames: ['result'] as const,
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
      help: 'HTTP requests answered, by method, route and status code.',
      labelNames: ['method', 'route', 'code'] as const,
      registers,
    }),
    httpRequestDuration: new Histogram({
      name: 'etcd_agent_http_request_duration_seconds',
      help: 'Time from the arrival of a request to its answer, by method, route and status code.',
      labelNames: ['method', 'route', 'code'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    clusterStatus: new Gauge({
      name: 'etcd_agent_cluster_status',
      help: 'Status of the last observation, one-hot: 1 for the current status, 0 for the others.',
      labelNames: ['status'] as const,
      registers,
      collect,
    }),
    quorumFaultTolerance: new Gauge({
      name: 'etcd_agent_quorum_fault_tolerance',
      help: 'Healthy voters that may still fail before quorum is lost; absent while the observation is unknown.',
      registers,
      collect,
    }),
    quorumHasQuorum: new Gauge({
      name: 'etcd_agent_quorum_has_quorum',
      help: '1 when the healthy voters reach a quorum, else 0; absent while the observation is unknown.',
      registers,
      collect,
    }),
    clusterLearners: new Gauge({
      name: 'etcd_agent_cluster_learners',
      help: 'Learners in the member list; absent while the observation is unknown.',
      registers,
      collect,
    }),
    clusterMembers: new Gauge({
      name: 'etcd_agent_cluster_members',
      help: 'Members in the member list (voters, learners, unstarted); absent while the observation is unknown.',
      registers,
      collect,
    }),
    clusterAlarms: new Gauge({
      name: 'etcd_agent_cluster_alarms',
      help: 'Members with this etcd alarm raised (NOSPACE, CORRUPT); absent while the observation is unknown.',
      labelNames: ['alarm'] as const,
      registers,
      collect,
    }),
    operationsInFlight: new Gauge({
      name: 'etcd_agent_operations_in_flight',
      help: 'Membership changes in flight cluster-wide (operation records); absent when they could not be read.',
      registers,
      collect,
    }),
    operationsOldestAge: new Gauge({
      name: 'etcd_agent_operations_oldest_age_seconds',
      help: 'Age of the oldest membership change in flight, 0 when none; absent when they could not be read.',
      registers,
      collect,
    }),
    buildInfo: buildInfo(registers),
    memberDbSize: new Gauge({
      name: 'etcd_agent_member_db_size_bytes',
      help: "Size of the member's database file (etcd's dbSize), in the last observation; absent while it is unknown.",
      labelNames: ['member'] as const,
      registers,
      collect,
    }),
    memberDbSizeInUse: new Gauge({
      name: 'etcd_agent_member_db_size_in_use_bytes',
      help: "Part of the member's database file in use (etcd's dbSizeInUse), in the last observation; absent while it is unknown.",
      labelNames: ['member'] as const,
      registers,
      collect,
    }),
    memberDbQuota: new Gauge({
      name: 'etcd_agent_member_db_quota_bytes',
      help: "The member's backend quota (--quota-backend-bytes, from its own etcd_server_quota_backend_bytes), read at most every 5 minutes.",
      labelNames: ['member'] as const,
      registers,
      collect,
    }),
    defrags: new Counter({
      name: 'etcd_agent_defrags_total',
      help: 'Defragment RPCs this agent sent, by member and result (ok or the error code).',
      labelNames: ['member', 'result'] as const,
      registers,
    }),
    defragDbSize: new Gauge({
      name: 'etcd_agent_defrag_db_size_bytes',
      help: "The member's database size just before (when=before) and after (when=after) this agent's last defragmentation of it.",
      labelNames: ['member', 'when'] as const,
      registers,
    }),
    defragDbSizeInUse: new Gauge({
      name: 'etcd_agent_defrag_db_size_in_use_bytes',
      help: "The member's database size in use just before (when=before) and after (when=after) this agent's last defragmentation of it.",
      labelNames: ['member', 'when'] as const,
      registers,
    }),
    defragDuration: new Gauge({
      name: 'etcd_agent_defrag_duration_seconds',
      help: "How long this agent's last defragmentation of the member took (its Defragment RPC).",
      labelNames: ['member'] as const,
      registers,
    }),
    defragRunning: new Gauge({
      name: 'etcd_agent_defrag_running',
      help: '1 while this agent runs a defragmentation (POST /v1/maintenance/defragment or the schedule), else 0.',
      registers,
    }),
    defragScheduleSkips: new Counter({
      name: 'etcd_agent_defrag_schedule_skips_total',
      help: 'Scheduled defragmentations (ETCD_AGENT_DEFRAG_SCHEDULE) that did not defragment, by reason.',
      labelNames: ['reason'] as const,
      registers,
    }),
    applyNudges: new Counter({
      name: 'etcd_agent_apply_nudges_total',
      help: "Writes through the quorum made so that this pod's joining member, silent, applies and serves, by result (written, failed).",
      labelNames: ['result'] as const,
      registers,
    }),
    backup: createBackupMetrics(registry),
    onScrape: (refresh) => {
      refreshers.add(refresh);
      return () => {
        refreshers.delete(refresh);
      };
    },
  };
}

function buildInfo(registers: Registry[]): Gauge<'version' | 'node_version'> {
  const gauge = new Gauge({
    name: 'etcd_agent_build_info',
    help: 'Always 1; the labels say which agent version runs on which Node.js.',
    labelNames: ['version', 'node_version'] as const,
    registers,
  });
  gauge.set({ version: BUILD_INFO.version, node_version: process.version }, 1);
  return gauge;
}

/** One answered HTTP request, as the request middleware (or a fast path that skips it) records it. */
export function recordHttpRequest(
  metrics: Pick<Metrics, 'httpRequests' | 'httpRequestDuration'>,
  request: { method: string; route: string; code: number; seconds: number },
): void {
  const labels = { method: request.method, route: request.route, code: String(request.code) };
  metrics.httpRequests.inc(labels);
  metrics.httpRequestDuration.observe(labels, request.seconds);
}
