/**
 * POST /v1/members/promote (docs/api.md §4), also the promotion step of a join
 * and of the auto-promotion of a learner's own pod: read, decide
 * (promote-decision.ts), and under the lock read again, decide again and send
 * MemberPromote when the decision says the learner is in sync.
 */
import { etcdRefusal } from '../etcd/errors';
import type { HeldLock } from '../etcd/held-lock';
import type { ActionResult, Member, MemberList } from '../proto/types';
import type { Answer } from './answer';
import type { MatchWanted } from './match';
import { answerToPromoteRefusal, decidePromote, promotedAnswer } from './promote-decision';
import type { ActionRun } from './run';

/** Sends MemberPromote for `learner` under `held`, and answers what etcd's reply means (promote-decision.ts). */
export async function promoteLearner(run: ActionRun, held: HeldLock, list: MemberList, learner: Member): Promise<Answer> {
  try {
    await run.send(held, 'promote', learner, () => run.deps.cluster.promoteMember(learner.id, run.deadline));
  } catch (err) {
    const answer = answerToPromoteRefusal(list, learner, etcdRefusal(err));
    if (answer === undefined) throw err;
    return answer;
  }
  return promotedAnswer(list, learner);
}

/** A member that etcd reports gone under us: read the list again (bounded by `converge`). */
export function retryOnVanished(err: unknown, attempt: number): boolean {
  return attempt <= 2 && etcdRefusal(err) === 'member-not-found';
}

/** Promotes the learner `wanted` names: `promoted`, `already-member`, or `in-progress`; `not-found` when no such member. */
export function promote(run: ActionRun, wanted: MatchWanted): Promise<ActionResult> {
  return run.perform((list, probe) => decidePromote(wanted, list, probe, run.sent), {
    intent: (first) => ({ name: first.member.name, peerURLs: first.member.peerURLs }),
    act: (held, list, decision) => promoteLearner(run, held, list, decision.member),
  });
}
