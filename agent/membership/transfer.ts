/**
 * POST /v1/leader/transfer (CONTRACT §4): `{"to": name}` moves leadership to that
 * voter (`transferred`, or `already-leader`); `{}` moves it away from this pod's
 * member to the most up-to-date healthy voter (`transferred`, or `not-leader`
 * when this pod's member does not lead). Read and probe, decide
 * (transfer-decision.ts), and under the lock: read, probe and decide again, then move.
 */
import type { TransferRequest } from '../proto/requests';
import type { ActionResult, MemberList } from '../proto/types';
import { moveLeadership } from './move-leadership';
import type { ClusterProbe } from './probe';
import type { ActionRun } from './run';
import { decideTransfer, transferredTo } from './transfer-decision';

/** Moves leadership as `req` asks; see the module comment. */
export async function transfer(run: ActionRun, req: TransferRequest): Promise<ActionResult> {
  const target = { to: req.to, self: run.deps.config.memberName };
  const decide = (list: MemberList, probe?: ClusterProbe) => decideTransfer(target, list, probe, run.sent);

  const first = await run.decide(await run.readMembers(), decide);
  if (first.kind === 'answer') return run.answer(first.answer);

  const intent = { action: run.action, member: { name: first.to.member.name, peerURLs: first.to.member.peerURLs } };
  return run.underLock(intent, (held) =>
    run.converge(async () => {
      const list = await run.readMembers();
      const next = await run.decide(list, decide);
      if (next.kind === 'answer') return run.answer(next.answer);
      await moveLeadership(run, held, next.from, next.to);
      return run.answer(transferredTo(list, next.to));
    }),
  );
}
