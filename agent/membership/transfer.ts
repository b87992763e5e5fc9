/**
 * POST /v1/leader/transfer (docs/api.md §4): `{"to": name}` moves leadership to that
 * voter (`transferred`, or `already-leader`); `{}` moves it away from this pod's
 * member to the most up-to-date healthy voter (`transferred`, or `not-leader`
 * when this pod's member does not lead). Read and probe, decide
 * (transfer-decision.ts), and under the lock: read, probe and decide again, then move.
 */
import type { TransferRequest } from '../proto/requests';
import type { ActionResult } from '../proto/types';
import { moveLeadership } from './move-leadership';
import type { ActionRun } from './run';
import { decideTransfer, transferredTo } from './transfer-decision';

/** Moves leadership as `req` asks; see the module comment. */
export function transfer(run: ActionRun, req: TransferRequest): Promise<ActionResult> {
  const target = { to: req.to, self: run.deps.config.memberName };
  return run.perform((list, probe) => decideTransfer(target, list, probe, run.sent), {
    intent: (first) => ({ name: first.to.member.name, peerURLs: first.to.member.peerURLs }),
    act: async (held, list, decision) => {
      await moveLeadership(run, held, decision.from, decision.to);
      return transferredTo(list, decision.to);
    },
  });
}
