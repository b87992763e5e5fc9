/**
 * POST /v1/members/leave (docs/api.md §4): remove a member, safely, any number of
 * times. The member is found in the member list by id, name or peer URL; the
 * leaving member itself is never needed (its etcd may be down or already gone).
 * Read, decide (leave-decision.ts), and under the lock: read again, decide
 * again, and act — move leadership away first when the member leads, then
 * remove it. A crash between the steps (the Cluster API incident) is recovered
 * by the next call: it reads the list again and does only what is still missing.
 */
import { crashPoint } from '../lib/crash-point';
import { etcdRefusal } from '../etcd/errors';
import type { LeaveRequest } from '../proto/requests';
import type { ActionResult } from '../proto/types';
import { answerToRemoveRefusal, decideLeave, removedAnswer, type LeaveProgress } from './leave-decision';
import { describeMember, wantedMember } from './match';
import { moveLeadership } from './move-leadership';
import type { ActionRun } from './run';

/** Removes the member `req` names; see leave-decision.ts for the table. */
export function leave(run: ActionRun, req: LeaveRequest): Promise<ActionResult> {
  const wanted = wantedMember(run.deps.config, req);
  const done: LeaveProgress = { sent: run.sent, moved: false };
  return run.perform((list, probe) => decideLeave(wanted, req.force === true, list, probe, done), {
    intent: (first) => {
      const target = first.kind === 'remove' ? first.member : first.from.member;
      return { name: target.name || (req.name ?? ''), peerURLs: target.peerURLs };
    },
    act: async (held, list, decision) => {
      if (decision.kind === 'move-leader') {
        await moveLeadership(run, held, decision.from, decision.to);
        done.moved = true;
        crashPoint('leave-leadership-moved');
        return 'again'; // read and decide again: the member is a follower now
      }
      const { member, leaderTransferred } = decision;
      // A MoveLeader whose answer was lost but which worked counts from now on, whatever the next read finds.
      if (leaderTransferred) done.moved = true;
      if (decision.forced !== undefined) {
        run.deps.logger.warn('removing a voter without a healthy quorum, as forced', {
          member: describeMember(member),
          reason: decision.forced,
          requestId: run.context.requestId,
        });
      }
      const removedBefore = done.removing?.id === member.id ? done.removing : undefined;
      done.removing = member;
      try {
        await run.send(held, 'remove', member, () => run.deps.cluster.removeMember(member.id, run.deadline));
      } catch (err) {
        const answer = answerToRemoveRefusal(list, member, etcdRefusal(err), removedBefore, leaderTransferred);
        if (answer === undefined) throw err;
        return answer;
      }
      return removedAnswer(list, member, leaderTransferred);
    },
  });
}
