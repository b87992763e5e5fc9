/**
 * What a promote call (and a join that found its learner) does, decided from
 * the member list, the members' status and what the call has sent. Pure.
 * etcd refuses to promote a learner until its log is within 10% of the
 * leader's; that refusal means "not yet" and answers `in-progress`, never an error.
 * https://etcd.io/docs/v3.4/learning/design-learner/
 */
import type { EtcdRefusal } from '../etcd/errors';
import { AgentError } from '../proto/errors';
import type { Member, MemberList } from '../proto/types';
import { requireQuorum, withMember, type Answer, type NeedsProbe, type Sent } from './answer';
import { matchMember, memberPhase, toConflictError, type MatchWanted } from './match';
import { learnerLooksReady, type ClusterProbe } from './probe';

/** A promote call's next step: answer, look at the members first, or send MemberPromote for `member`. */
export type PromoteDecision = { kind: 'answer'; answer: Answer } | NeedsProbe | { kind: 'promote'; member: Member };

/**
 * The decision for `member`, found in `list` by a promote or a join:
 *
 *   unstarted                     → answer in-progress (or `added` when this call added it, for a join)
 *   started voter                 → answer promoted (this call sent the promote) or already-member
 *   started learner, no probe yet → probe
 *   learner, no quorum answering  → throws unavailable
 *   learner clearly behind        → answer in-progress
 *   learner in sync (or unknown)  → promote
 */
export function decideFound(list: MemberList, member: Member, probe: ClusterProbe | undefined, sent: Sent): PromoteDecision {
  if (!member.started) {
    // etcd cannot promote a member that has not started; it becomes a learner (or voter) once it does.
    const outcome = sent.has('add') ? 'added' : 'in-progress';
    return { kind: 'answer', answer: { outcome, complete: false, phase: 'unstarted', member, list } };
  }
  if (!member.isLearner) {
    const outcome = sent.has('promote') ? 'promoted' : 'already-member';
    return { kind: 'answer', answer: { outcome, complete: true, phase: 'voter', member, list } };
  }
  if (probe === undefined) return { kind: 'probe' };
  requireQuorum(probe);
  if (!readyToPromote(probe, member)) return { kind: 'answer', answer: notYet(list, member) };
  return { kind: 'promote', member };
}

/** POST /v1/members/promote: the member `wanted` names must exist (`not-found`), then as `decideFound`. */
export function decidePromote(wanted: MatchWanted, list: MemberList, probe: ClusterProbe | undefined, sent: Sent): PromoteDecision {
  const found = matchMember(list.members, wanted);
  if (found.kind === 'conflict') throw toConflictError(found);
  if (found.kind === 'none') {
    const named = wanted.id ?? wanted.name ?? wanted.peerURLs.join(',');
    throw new AgentError('not-found', `no member ${named} in the cluster`, { details: { requested: wanted } });
  }
  return decideFound(list, found.member, probe, sent);
}

/** The answer once etcd accepted MemberPromote of `learner`: it is a voter now. */
export function promotedAnswer(list: MemberList, learner: Member): Answer {
  const voter = { ...learner, isLearner: false };
  return { outcome: 'promoted', complete: true, phase: 'voter', member: voter, list: withMember(list, voter) };
}

/**
 * The answer when etcd refused MemberPromote of `learner` for `refusal`: not in sync yet answers
 * in-progress; "not a learner" means another agent promoted it between our read and our RPC
 * (already-member). Undefined for any other failure: the caller rethrows it.
 */
export function answerToPromoteRefusal(list: MemberList, learner: Member, refusal: EtcdRefusal | undefined): Answer | undefined {
  if (refusal === 'learner-not-ready') return notYet(list, learner);
  if (refusal === 'not-learner') return { ...promotedAnswer(list, learner), outcome: 'already-member' };
  return undefined;
}

/** True unless the statuses show the learner clearly behind the leader (unknown: let etcd decide). */
function readyToPromote(probe: ClusterProbe, learner: Member): boolean {
  const own = probe.of(learner.id)?.status;
  const leader = probe.leader?.status;
  return own === undefined || leader === undefined || learnerLooksReady(own, leader);
}

/** The learner is not in sync yet: 202 `in-progress`. */
function notYet(list: MemberList, member: Member): Answer {
  return { outcome: 'in-progress', complete: false, phase: memberPhase(member), member, list };
}
