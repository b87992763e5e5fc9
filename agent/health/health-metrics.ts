/**
 * Feeds the cluster gauges from one health observation (docs/api.md §4 GET /metrics).
 *
 * Invariant: every gauge derived from an observation is either set from that observation or
 * absent. While the observation is `unknown` only `etcd_agent_cluster_status{status="unknown"}`
 * (and `etcd_agent_cluster_healthy` 0) say so: the quorum, member, alarm and operation gauges are
 * removed, so a slow agent never reads as "0 healthy voters", which is quorum loss.
 */
import type { ClusterHealth, HealthStatus } from './types';
import type { Metrics } from '../observability/metrics';

/** Every value `etcd_agent_cluster_status{status}` takes; exactly one of them is 1. */
export const CLUSTER_STATUSES: readonly HealthStatus[] = ['healthy', 'degraded', 'unavailable', 'unknown'];

/** Alarms always exported (0 when not raised), so a rule or panel over them has a series to read. */
export const KNOWN_ALARMS = ['NOSPACE', 'CORRUPT'] as const;

/** Sets the cluster gauges from a finished observation; `unknown` goes to `recordUnknownHealth`. */
export function recordClusterHealth(metrics: Metrics, health: ClusterHealth, now = Date.now()): void {
  if (health.status === 'unknown' || health.quorum === null) {
    recordUnknownHealth(metrics);
    return;
  }
  recordStatus(metrics, health.status);
  const { quorum } = health;
  metrics.quorumVoters.set(quorum.voters);
  metrics.quorumHealthyVoters.set(quorum.healthyVoters);
  metrics.quorumFaultTolerance.set(quorum.faultTolerance);
  metrics.quorumHasQuorum.set(quorum.hasQuorum ? 1 : 0);

  metrics.memberReachable.reset();
  metrics.memberDbSize.reset();
  metrics.memberDbSizeInUse.reset();
  if (health.members.length === 0) {
    // No member list was known: counting members as 0 would be a claim, not an observation.
    metrics.clusterMembers.remove();
    metrics.clusterLearners.remove();
  } else {
    metrics.clusterMembers.set(health.members.length);
    metrics.clusterLearners.set(health.members.filter((m) => m.isLearner).length);
    for (const m of health.members) {
      const member = m.name || m.id;
      metrics.memberReachable.set({ member }, m.reachable ? 1 : 0);
      // A member that did not answer has no size in this observation: absent, not 0.
      if (m.dbSizeBytes !== null) metrics.memberDbSize.set({ member }, m.dbSizeBytes);
      if (m.dbSizeInUseBytes !== null) metrics.memberDbSizeInUse.set({ member }, m.dbSizeInUseBytes);
    }
  }

  metrics.clusterAlarms.reset();
  for (const alarm of KNOWN_ALARMS) metrics.clusterAlarms.set({ alarm }, 0);
  for (const { alarm } of health.alarms) metrics.clusterAlarms.inc({ alarm });

  if (health.operations === undefined) {
    metrics.operationsInFlight.remove();
    metrics.operationsOldestAge.remove();
  } else {
    metrics.operationsInFlight.set(health.operations.length);
    metrics.operationsOldestAge.set(
      oldestAgeSeconds(
        health.operations.map((o) => o.startedAt),
        now,
      ),
    );
  }
}

/** The observation is `unknown`: status says so, and every observation-derived gauge is removed. */
export function recordUnknownHealth(metrics: Metrics): void {
  recordStatus(metrics, 'unknown');
  metrics.quorumVoters.remove();
  metrics.quorumHealthyVoters.remove();
  metrics.quorumFaultTolerance.remove();
  metrics.quorumHasQuorum.remove();
  metrics.clusterMembers.remove();
  metrics.clusterLearners.remove();
  metrics.clusterAlarms.reset();
  metrics.memberReachable.reset();
  metrics.memberDbSize.reset();
  metrics.memberDbSizeInUse.reset();
  metrics.operationsInFlight.remove();
  metrics.operationsOldestAge.remove();
}

function recordStatus(metrics: Metrics, status: HealthStatus): void {
  metrics.clusterHealthy.set(status === 'healthy' ? 1 : 0);
  for (const s of CLUSTER_STATUSES) metrics.clusterStatus.set({ status: s }, s === status ? 1 : 0);
}

/** Seconds since the earliest of `startedAt` (ISO times), 0 when there is none or none parses. */
export function oldestAgeSeconds(startedAt: readonly string[], now: number): number {
  const times = startedAt.map((t) => Date.parse(t)).filter((t) => Number.isFinite(t));
  if (times.length === 0) return 0;
  return Math.max(0, (now - Math.min(...times)) / 1000);
}
