/**
 * Whether this pod serves the cluster, for KubeBlocks' availableProbe (`GET /v1/available`). Pure:
 * the cluster observation and this pod's member as `/v1/health` and `/v1/health/local` see them go in.
 *
 * Invariant: `available` only when the observation counted a quorum of healthy voters and a leader,
 * and this pod's member is one of those healthy voters (ready as `/v1/health/local` says, not a
 * learner). A pod cut off from a majority, a learner and a member that does not answer are never
 * available, so a Component counting its available pods counts only a quorum it really has.
 */
import type { ClusterHealth, LocalHealth } from './types';

/** The verdict: the text a probe reports on success, or why not. */
export type Availability = { available: true; text: string } | { available: false; reason: string };

/** Whether this pod's member is a healthy voter of a cluster that has a quorum. */
export function availabilityOf(cluster: ClusterHealth, local: LocalHealth): Availability {
  const quorum = cluster.quorum;
  if (cluster.status === 'unknown' || quorum === null) {
    return { available: false, reason: cluster.errors[0] ?? 'no health observation finished in time' };
  }
  const counts = `${quorum.healthyVoters} of ${quorum.voters} voters healthy, ${quorum.required} required`;
  if (!quorum.hasQuorum) return { available: false, reason: `no quorum: ${counts}` };
  if (cluster.status === 'unavailable' || cluster.leader === null) {
    return { available: false, reason: cluster.errors[0] ?? `no leader (${counts})` };
  }
  const name = local.member.name;
  if (!local.ready) {
    return { available: false, reason: `${name} is not ready: ${local.member.errors.at(-1) ?? 'no answer'}` };
  }
  if (local.member.isLearner) return { available: false, reason: `${name} is a learner, not yet a voter` };
  const voter = cluster.members.find((m) => m.id === local.member.id);
  if (voter === undefined || voter.isLearner || !voter.reachable) {
    return { available: false, reason: `${name} is not among the healthy voters (${counts})` };
  }
  return { available: true, text: `available: ${name} is a healthy voter; ${counts}` };
}

/**
 * The success text stamped with the observation's time floored to a multiple of `seconds`: a probe
 * whose output changes at least that often is reported as a new event each time (KubeBlocks v1.0.2
 * dates a repeated report by its first time, and forgets it after its window; docs/api.md
 * `GET /v1/available`).
 */
export function stampedText(text: string, observedAt: string | null, seconds: number): string {
  if (observedAt === null) return text;
  const ms = Date.parse(observedAt);
  if (Number.isNaN(ms)) return text;
  const floored = new Date(ms - (ms % (seconds * 1000)));
  return `${text}; as of ${floored.toISOString().replace(/\.000Z$/, 'Z')}`;
}
