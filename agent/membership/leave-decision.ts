/**
 * What a leave call does (docs/api.md §4 POST /v1/members/leave), decided from the
 * member list, the members' status and what the call has done so far. Pure.
 *
 *   no matching member                    → answer removed (this call removed it) or already-absent
 *   learner or unstarted member           → remove
 *   started voter, no probe yet           → probe
 *   voter, quorum would not stay healthy  → throws unsafe, unless forceable and forced
 *   the last voter                        → throws unsafe, even when forced
 *   voter that leads, a successor answers → move-leader first (once per call)
 *   other voter                           → remove
 */
import type { EtcdRefusal } from '../etcd/errors';
import { AgentError } from '../proto/errors';
import type { Member, MemberList } from '../proto/types';
import { withMember, type Answer, type NeedsProbe, type Sent } from './answer';
import { describeMember, matchMember, toConflictError, type MatchWanted } from './match';
import type { ClusterProbe, MemberProbe } from './probe';
import { checkRemoval } from './quorum';

/** What a leave call has done so far, as its decisions need to know it. */
export interface LeaveProgress {
  sent: Sent;
  /** The member this call last sent MemberRemove for (its answer may have been lost). */
  removing?: Member;
  /**
   * True once this call has moved leadership away from the member: its MoveLeader answered, or a
   * decision found leadership elsewhere after a MoveLeader whose answer was lost (the act records it).
   */
  moved: boolean;
}

/** A leave's next step. `forced` carries the quorum warning a forced removal overrides. */
export type LeaveDecision =
  | { kind: 'answer'; answer: Answer }
  | NeedsProbe
  | { kind: 'move-leader'; from: MemberProbe; to: MemberProbe }
  | { kind: 'remove'; member: Member; leaderTransferred: boolean; forced?: string };

/** Decides a leave; see the table above. */
export function decideLeave(
  wanted: MatchWanted,
  force: boolean,
  list: MemberList,
  probe: ClusterProbe | undefined,
  done: LeaveProgress,
): LeaveDecision {
  const found = matchMember(list.members, wanted);
  if (found.kind === 'conflict') throw toConflictError(found);
  if (found.kind === 'none') return { kind: 'answer', answer: { ...answerWhenGone(list, done.removing), leaderTransferred: done.moved } };
  const member = found.member;
  if (!member.started || member.isLearner) return { kind: 'remove', member, leaderTransferred: done.moved };
  if (probe === undefined) return { kind: 'probe' };

  const verdict = checkRemoval({
    voters: probe.voters.length,
    healthyVoters: probe.healthyVoters,
    startedVoters: probe.voters.filter((v) => v.started).length,
    target: { name: member.name || describeMember(member), isVoter: true, healthy: probe.isHealthy(member.id) },
  });
  if (!verdict.safe && (!verdict.forceable || !force)) {
    const hint = verdict.forceable ? '; force: true removes it anyway' : '';
    // Checked again after this call moved leadership away: the refusal says the move happened.
    const moved = done.moved ? { leaderTransferred: true } : {};
    throw new AgentError('unsafe', `${verdict.message}${hint}`, {
      details: { ...verdict.details, forceable: verdict.forceable, ...moved },
    });
  }
  const forced = verdict.safe ? {} : { forced: verdict.message };

  const leader = probe.leader;
  if (leader?.member.id !== member.id) {
    // A MoveLeader of an earlier attempt whose answer was lost may have worked: count it.
    const leaderTransferred = done.moved || (done.sent.has('move-leader') && leader !== undefined);
    return { kind: 'remove', member, leaderTransferred, ...forced };
  }
  const from = probe.of(member.id);
  const to = probe.mostUpToDate(member.id);
  // Leadership moves once per call. Without a successor that answers (only possible when forced),
  // or a leader that answers at a URL, etcd elects a new leader after the removal.
  if (done.moved || from?.status === undefined || from.url === undefined || to === undefined) {
    return { kind: 'remove', member, leaderTransferred: done.moved, ...forced };
  }
  return { kind: 'move-leader', from, to };
}

/**
 * The answer once the member is not (or no longer) in `list`: `removed`, naming it, when this call
 * sent its MemberRemove (`removed`; its answer may have been lost), else `already-absent`.
 */
export function answerWhenGone(list: MemberList, removed: Member | undefined): Answer {
  if (removed === undefined) return { outcome: 'already-absent', complete: true, list };
  return { outcome: 'removed', complete: true, member: removed, list: withMember(list, removed, true) };
}

/** The answer once etcd accepted MemberRemove of `member`. */
export function removedAnswer(list: MemberList, member: Member, leaderTransferred: boolean): Answer {
  return { outcome: 'removed', complete: true, member, list: withMember(list, member, true), leaderTransferred };
}

/**
 * The answer when etcd refused MemberRemove of `member` for `refusal`: when etcd no longer knows
 * the member, someone else finished the job (or an earlier attempt of this call, `removedBefore`,
 * whose answer was lost). Undefined for any other failure: the caller rethrows it.
 */
export function answerToRemoveRefusal(
  list: MemberList,
  member: Member,
  refusal: EtcdRefusal | undefined,
  removedBefore: Member | undefined,
  leaderTransferred: boolean,
): Answer | undefined {
  if (refusal !== 'member-not-found') return undefined;
  return { ...answerWhenGone(withMember(list, member, true), removedBefore), leaderTransferred };
}
