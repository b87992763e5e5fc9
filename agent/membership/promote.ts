/**
 * Promotion of a learner (CONTRACT §4 POST /v1/members/promote), also used by
 * join and by the auto-promotion of a learner's own pod. etcd refuses to
 * promote a learner until its log is within 10% of the leader's; that refusal
 * means "not yet" and answers `in-progress`, never an error.
 * https://etcd.io/docs/v3.4/learning/design-learner/
 */
import { isLearnerNotReady, isMemberNotFound, isNotLearner } from '../etcd/errors';
import type { HeldLock } from '../etcd/held-lock';
import { AgentError } from '../proto/errors';
import type { ActionResult, Member, MemberList } from '../proto/types';
import { matchMember, memberPhase, MatchWanted, toConflictError } from './match';
import { learnerLooksReady, type ClusterProbe } from './probe';
import { ActionRun, Answer, etcdSaid, requireQuorum, withMember } from './run';

/** What a promote call finds in the member list. */
export type PromotePlan = { kind: 'answer'; answer: Answer } | { kind: 'promote'; member: Member };

/** The answer for a found member that needs no RPC, or `promote` for a started learner. */
export function planForMember(run: ActionRun, list: MemberList, member: Member): PromotePlan {
  if (!member.started) {
    // etcd cannot promote a member that has not started; it becomes a learner (or voter) once it does.
    return { kind: 'answer', answer: { outcome: 'in-progress', complete: false, phase: 'unstarted', member, list } };
  }
  if (member.isLearner) return { kind: 'promote', member };
  const outcome = run.sent.has('promote') ? 'promoted' : 'already-member';
  return { kind: 'answer', answer: { outcome, complete: true, phase: 'voter', member, list } };
}

/** True unless the statuses show the learner clearly behind the leader (unknown: let etcd decide). */
export function readyToPromote(probe: ClusterProbe, learner: Member): boolean {
  const own = probe.of(learner.id)?.status;
  const leader = probe.leader?.status;
  return own === undefined || leader === undefined || learnerLooksReady(own, leader);
}

/** The learner is not in sync yet: 202 `in-progress`. */
export function notYet(list: MemberList, member: Member): Answer {
  return { outcome: 'in-progress', complete: false, phase: memberPhase(member), member, list };
}

/**
 * Under the lock: checks quorum and the learner's progress, then sends MemberPromote.
 * "Not in sync" (ours or etcd's) answers in-progress; "not a learner" means someone promoted it.
 */
export async function promoteUnderLock(run: ActionRun, held: HeldLock, list: MemberList, learner: Member): Promise<Answer> {
  const probe = await run.probe(list.members);
  requireQuorum(probe);
  if (!readyToPromote(probe, learner)) return notYet(list, learner);
  try {
    await run.send(held, 'promote', learner, () => run.deps.cluster.promoteMember(learner.id, run.deadline));
  } catch (err) {
    if (etcdSaid(err, isLearnerNotReady)) return notYet(list, learner);
    if (!etcdSaid(err, isNotLearner)) throw err;
    // Another agent promoted it between our read and our RPC: it is a voter now.
    const voter = { ...learner, isLearner: false };
    return { outcome: 'already-member', complete: true, phase: 'voter', member: voter, list: withMember(list, voter) };
  }
  const voter = { ...learner, isLearner: false };
  return { outcome: 'promoted', complete: true, phase: 'voter', member: voter, list: withMember(list, voter) };
}

/** A member that etcd reports gone under us: read the list again (bounded by `converge`). */
export function retryOnVanished(err: unknown, attempt: number): boolean {
  return attempt <= 2 && etcdSaid(err, isMemberNotFound);
}

/** POST /v1/members/promote: `promoted`, `already-member`, or `in-progress`; `not-found` when no such member. */
export async function promote(run: ActionRun, wanted: MatchWanted): Promise<ActionResult> {
  const decide = (list: MemberList): PromotePlan => {
    const found = matchMember(list.members, wanted);
    if (found.kind === 'conflict') throw toConflictError(found);
    if (found.kind === 'none') {
      const named = wanted.id ?? wanted.name ?? wanted.peerURLs.join(',');
      throw new AgentError('not-found', `no member ${named} in the cluster`, { details: { requested: wanted } });
    }
    return planForMember(run, list, found.member);
  };

  const list = await run.readMembers();
  const plan = decide(list);
  if (plan.kind === 'answer') return run.answer(plan.answer);
  // Cheap check first, without the lock: most calls for a catching-up learner end here.
  const probe = await run.probe(list.members);
  requireQuorum(probe);
  if (!readyToPromote(probe, plan.member)) return run.answer(notYet(list, plan.member));

  const intent = { action: run.action, member: { name: plan.member.name, peerURLs: plan.member.peerURLs } };
  return run.underLock(intent, (held) =>
    run.converge(async () => {
      const again = await run.readMembers();
      const next = decide(again);
      if (next.kind === 'answer') return run.answer(next.answer);
      return run.answer(await promoteUnderLock(run, held, again, next.member));
    }),
  );
}
