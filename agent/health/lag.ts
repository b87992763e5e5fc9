/**
 * How far behind the leader a member is (pure): a voter lags once its applied index trails the
 * leader's committed index by etcd's own limit, a learner until it is in sync (membership/quorum.ts).
 */
import { isLearnerInSync, LEARNER_READY_RATIO } from '../membership/quorum';
import type { Member, MemberStatus } from '../proto/types';

/**
 * A voter whose applied index is this far behind the leader's committed index is "lagging": it is
 * etcd's own limit (`maxGapBetweenApplyAndCommitIndex`), past which a member refuses requests.
 */
export const VOTER_MAX_APPLY_LAG = 5000;

/** The committed index to measure lag against: the leader's own, else the highest one that agrees. */
export function leaderIndex(leaderId: string, members: Member[], statusById: Map<string, { status: MemberStatus }>): number | undefined {
  const own = statusById.get(leaderId)?.status;
  if (own !== undefined) return own.raftIndex;
  const agreeing = members
    .map((m) => statusById.get(m.id)?.status)
    .filter((s): s is MemberStatus => s !== undefined && s.leaderId === leaderId);
  return agreeing.length === 0 ? undefined : Math.max(...agreeing.map((s) => s.raftIndex));
}

/** Why `member` lags behind `reference` (the leader's committed index), or undefined when it does not. */
export function lagOf(member: Member, status: MemberStatus, reference: number | undefined): string | undefined {
  if (reference === undefined) return undefined;
  if (member.isLearner) {
    return isLearnerInSync(status.raftIndex, reference) ? undefined : learnerLag(status.raftIndex, reference);
  }
  const behind = reference - status.raftAppliedIndex;
  return behind > VOTER_MAX_APPLY_LAG
    ? `lagging: applied index ${status.raftAppliedIndex} is ${behind} entries behind the leader's ${reference}`
    : undefined;
}

/** Why a learner at raft index `index` is not in sync with the leader's `leader`. */
export function learnerLag(index: number, leader: number): string {
  return `lagging: raft index ${index} is behind the leader's ${leader} (a learner is in sync at ${Math.ceil(leader * LEARNER_READY_RATIO)})`;
}
