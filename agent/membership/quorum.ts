/**
 * Quorum arithmetic for membership changes (docs/api.md §4 join and leave tables), and when a learner
 * is in sync enough to be promoted. Pure.
 *
 * `voters` counts members that are not learners (etcd counts an unstarted voter in its quorum);
 * `healthyVoters` those that answered a status call just now, so never more than `voters`.
 * Counts that break this (negative, fractional, healthy > voters) are a bug of the caller and
 * throw AgentError `internal`.
 */
import { AgentError } from '../proto/errors';

/**
 * etcd promotes a learner only once its log is within 10% of the leader's (etcd server's
 * `isLearnerReady`, readyPercent = 0.9); a learner short of that is "lagging".
 */
export const LEARNER_READY_RATIO = 0.9;

/** True when a learner at `learnerIndex` is close enough to the leader at `leaderIndex` to be promoted. */
export function isLearnerInSync(learnerIndex: number, leaderIndex: number): boolean {
  return learnerIndex >= leaderIndex * LEARNER_READY_RATIO;
}

function checkCounts(voters: number, healthyVoters?: number): void {
  const ok =
    Number.isInteger(voters) &&
    voters >= 0 &&
    (healthyVoters === undefined || (Number.isInteger(healthyVoters) && healthyVoters >= 0 && healthyVoters <= voters));
  if (!ok) {
    throw new AgentError('internal', `invalid voter counts: ${voters} voters, ${healthyVoters ?? '-'} healthy`, {
      details: { voters, healthyVoters },
    });
  }
}

function voterWord(n: number): string {
  return n === 1 ? 'voter' : 'voters';
}

/**
 * Voters needed for a quorum: floor(voters / 2) + 1. For 0 voters it is 1, so a cluster without
 * voters never has a quorum.
 */
export function quorumOf(voters: number): number {
  checkCounts(voters);
  return Math.floor(voters / 2) + 1;
}

/** True when the healthy voters reach a quorum of all voters. */
export function hasQuorum(voters: number, healthyVoters: number): boolean {
  checkCounts(voters, healthyVoters);
  return healthyVoters >= quorumOf(voters);
}

/** How many more healthy voters may fail before quorum is lost: max(0, healthy − quorum). */
export function faultTolerance(voters: number, healthyVoters: number): number {
  checkCounts(voters, healthyVoters);
  return Math.max(0, healthyVoters - quorumOf(voters));
}

/**
 * Whether a membership change keeps quorum. `forceable` says whether `force: true` may override
 * it; `details.voters`/`healthyVoters` are the counts now, `required` the quorum after the change.
 */
export type SafetyVerdict =
  | { safe: true }
  | {
      safe: false;
      message: string;
      forceable: boolean;
      details: { voters: number; healthyVoters: number; required: number; [k: string]: unknown };
    };

/**
 * A voter add (`learner: false`) is unsafe when healthy voters < quorum of (voters + 1): the new
 * member counts in the quorum before it has started. Not forceable (join has no `force`).
 */
export function checkVoterAdd(input: { voters: number; healthyVoters: number; name: string }): SafetyVerdict {
  const { voters, healthyVoters, name } = input;
  checkCounts(voters, healthyVoters);
  const after = voters + 1;
  const required = quorumOf(after);
  if (healthyVoters >= required) return { safe: true };
  return {
    safe: false,
    forceable: false,
    message: `adding ${name} as a voter makes ${after} ${voterWord(after)} with ${healthyVoters} healthy; quorum needs ${required}`,
    details: { voters, healthyVoters, required, votersAfter: after },
  };
}

/**
 * Removing a learner or unstarted member (`isVoter: false`) is always safe. Removing the last voter
 * is unsafe even with force. Otherwise unsafe (forceable) when the remaining healthy voters are
 * fewer than a quorum of the remaining voters.
 */
export function checkRemoval(input: {
  voters: number;
  healthyVoters: number;
  /** Voters that have started; unstarted voters count in the quorum but serve nothing. Defaults to `voters`. */
  startedVoters?: number;
  target: { name: string; isVoter: boolean; healthy: boolean };
}): SafetyVerdict {
  const { voters, healthyVoters, target } = input;
  checkCounts(voters, healthyVoters);
  if (!target.isVoter) return { safe: true };
  // The last started voter is the last voter that holds the data, whatever unstarted voters are listed.
  if (voters <= 1 || (input.startedVoters ?? voters) <= 1) {
    return {
      safe: false,
      forceable: false,
      message: `removing ${target.name} would remove the last voter`,
      details: { voters, healthyVoters, required: 1, remainingVoters: 0, remainingHealthyVoters: 0 },
    };
  }
  const remaining = voters - 1;
  // Clamped so counts taken a moment apart (target said unhealthy, all said healthy) stay coherent.
  const remainingHealthy = Math.min(remaining, Math.max(0, healthyVoters - (target.healthy ? 1 : 0)));
  const required = quorumOf(remaining);
  if (remainingHealthy >= required) return { safe: true };
  return {
    safe: false,
    forceable: true,
    message: `removing ${target.name} leaves ${remainingHealthy} healthy ${voterWord(remainingHealthy)} of ${remaining}; quorum needs ${required}`,
    details: { voters, healthyVoters, required, remainingVoters: remaining, remainingHealthyVoters: remainingHealthy },
  };
}
