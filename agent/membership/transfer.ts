/**
 * POST /v1/leader/transfer (CONTRACT §4): `{"to": name}` moves leadership to that
 * voter (`transferred`, or `already-leader`); `{}` moves it away from this pod's
 * member to the most up-to-date healthy voter (`transferred`, or `not-leader`
 * when this pod's member does not lead).
 */
import { AgentError } from '../proto/errors';
import type { TransferRequest } from '../proto/requests';
import type { ActionResult, MemberList } from '../proto/types';
import type { ClusterProbe, MemberProbe } from './probe';
import { moveLeadership } from './leave';
import { ActionRun, describeMember, requireQuorum } from './run';

type TransferPlan =
  | { kind: 'answer'; outcome: 'already-leader' | 'not-leader' | 'transferred'; leader: MemberProbe }
  | { kind: 'move'; from: MemberProbe; to: MemberProbe };

function plan(run: ActionRun, req: TransferRequest, list: MemberList, probe: ClusterProbe): TransferPlan {
  requireQuorum(probe);
  const leader = probe.leader;
  if (leader === undefined) throw new AgentError('unavailable', 'no member reports a leader');
  // After a MoveLeader of this call (even one whose answer was lost), "nothing to do" means it worked.
  if (run.sent.has('move-leader')) run.leaderTransferred = true;
  const done = run.leaderTransferred ? 'transferred' : undefined;

  if (req.to !== undefined) {
    const to = list.members.find((m) => m.started && m.name === req.to);
    if (to === undefined) throw new AgentError('not-found', `no started member named ${req.to}`);
    if (to.isLearner) throw new AgentError('bad-request', `${req.to} is a learner; leadership can only move to a voter`);
    if (leader.member.id === to.id) return { kind: 'answer', outcome: done ?? 'already-leader', leader };
    const target = probe.of(to.id);
    if (target?.status === undefined) {
      throw new AgentError('unsafe', `${describeMember(to)} did not answer a status call; leadership stays with ${describeMember(leader.member)}`);
    }
    return { kind: 'move', from: leader, to: target };
  }

  const self = list.members.find((m) => m.started && m.name === run.deps.config.memberName);
  if (self === undefined || leader.member.id !== self.id) return { kind: 'answer', outcome: done ?? 'not-leader', leader };
  const to = probe.mostUpToDate(self.id);
  if (to === undefined) {
    throw new AgentError('unsafe', `no other healthy voter can take over leadership from ${describeMember(self)}`);
  }
  return { kind: 'move', from: leader, to };
}

/** Moves leadership as `req` asks; see the module comment. */
export async function transfer(run: ActionRun, req: TransferRequest): Promise<ActionResult> {
  const answer = (list: MemberList, outcome: 'already-leader' | 'not-leader' | 'transferred', leader: MemberProbe): ActionResult =>
    run.answer({ outcome, complete: true, list, leader: { id: leader.member.id, name: leader.member.name } });

  const list = await run.readMembers();
  const first = plan(run, req, list, await run.probe(list.members));
  if (first.kind === 'answer') return answer(list, first.outcome, first.leader);

  const intent = { action: run.action, member: { name: first.to.member.name, peerURLs: first.to.member.peerURLs } };
  return run.underLock(intent, (held) =>
    run.converge(async () => {
      const again = await run.readMembers();
      const next = plan(run, req, again, await run.probe(again.members));
      if (next.kind === 'answer') return answer(again, next.outcome, next.leader);
      await moveLeadership(run, held, next.from, next.to);
      return answer(again, 'transferred', next.to);
    }),
  );
}
