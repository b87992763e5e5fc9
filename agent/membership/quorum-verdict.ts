/**
 * Can the cluster answer a call that goes through a quorum (the member list, the lock, the
 * operation records), or not? The rule that tells a cluster without a quorum from one electing a
 * leader, so that a call answers `unavailable` at once in the first case and waits in the second.
 * Pure.
 *
 * - `no-quorum`: fewer voters answer a status call than a quorum of all voters. etcd cannot decide
 *   anything until some come back; waiting for it spends the caller's deadline on nothing.
 * - `electing`: a quorum of voters answers, but no quorum of them names one leader (an election, or
 *   views that still differ right after one): a matter of moments, waited out inside the deadline.
 * - `leader`: a quorum answers and names one leader; a call that still waits is slow for some other
 *   reason, and goes on waiting.
 * - `unknown`: no voter is known (no member list could be read, not even a member's own copy), so
 *   there is nothing to count: the call goes on waiting.
 *
 * A voter is counted as etcd counts it: an unstarted voter is a voter that does not answer.
 *
 * A `no-quorum` is proof only when the silent voters that merely ran out of time could not make the
 * quorum either (`provesNoQuorum`): a call that times out may have met a busy member, or an agent
 * held up itself (a pause of its own process makes every call in flight miss its deadline), as much
 * as a member down. A refused connection, an unstarted voter or an answer in etcd's words is proof,
 * of a voter in the member list the look counted by.
 */
import { AgentError } from '../proto/errors';
import { quorumOf } from './quorum';

/** What a look at the voters found: the fresh health observation's, or a quick probe's. */
export interface QuorumEvidence {
  /** Voting members, answering or not. */
  voters: number;
  /** Voters that answered a status call in this look. */
  answering: number;
  /** A quorum of the voters names one leader (membership/leader.ts). */
  leader: boolean;
  /** Of the voters that did not answer, those whose call only ran out of time (no refusal). */
  outOfTime?: number;
  /** The voters were counted by a member list read before this look, not during it. */
  listedBefore?: boolean;
}

/** The figures a `no-quorum` answer carries, as `unsafe` carries them (docs/api.md §4). */
export interface QuorumFigures {
  voters: number;
  healthyVoters: number;
  required: number;
}

/** The verdict of one look; see the module comment. */
export type QuorumVerdict =
  | ({ kind: 'no-quorum' } & QuorumFigures)
  | ({ kind: 'electing' } & QuorumFigures)
  | ({ kind: 'leader' } & QuorumFigures)
  | { kind: 'unknown' };

/** The rule; `evidence` undefined means nothing could be looked at. */
export function quorumVerdict(evidence: QuorumEvidence | undefined): QuorumVerdict {
  if (evidence === undefined || evidence.voters <= 0) return { kind: 'unknown' };
  const figures = {
    voters: evidence.voters,
    healthyVoters: Math.min(evidence.answering, evidence.voters),
    required: quorumOf(evidence.voters),
  };
  if (figures.healthyVoters < figures.required) return { kind: 'no-quorum', ...figures };
  return { kind: evidence.leader ? 'leader' : 'electing', ...figures };
}

/**
 * True when `evidence` finds no quorum and would not find one had every voter that only ran out of
 * time answered: then no second look can change the verdict (see the module comment). Voters
 * counted by a list read before the look prove nothing while some member answers: members may have
 * joined or left since, and a member that answers can tell the current list.
 */
export function provesNoQuorum(evidence: QuorumEvidence | undefined): boolean {
  const verdict = quorumVerdict(evidence);
  if (verdict.kind !== 'no-quorum' || evidence === undefined) return false;
  if (evidence.listedBefore === true && evidence.answering > 0) return false;
  return verdict.healthyVoters + (evidence.outOfTime ?? 0) < verdict.required;
}

/** Marks the `unavailable` of a lost quorum among other `unavailable` answers. */
const NO_QUORUM = Symbol('no-quorum');

/**
 * The contract's `unavailable` (503, retryable) for a `no-quorum` verdict, reached while `step`:
 * the message names the figures, `details` carries them.
 */
export function noQuorumError(figures: QuorumFigures, step: string): AgentError {
  const { voters, healthyVoters, required } = figures;
  const error = new AgentError(
    'unavailable',
    `no quorum: ${healthyVoters} of ${voters} voters answer, ${required} needed; etcd can decide nothing until a quorum is back (${step})`,
    { details: { voters, healthyVoters, required } },
  );
  Object.defineProperty(error, NO_QUORUM, { value: true });
  return error;
}

/** True for an error made by `noQuorumError`. */
export function isNoQuorum(err: unknown): err is AgentError {
  return err instanceof AgentError && (err as unknown as Record<symbol, unknown>)[NO_QUORUM] === true;
}
