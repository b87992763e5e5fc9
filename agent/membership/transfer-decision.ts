/**
 * What a leader transfer does (docs/api.md §4 POST /v1/leader/transfer), decided
 * from the member list, the members' status and what the call has sent. Pure.
 *
 *   no quorum answering, or no leader          → throws unavailable
 *   {"to": name}: no started member so named   → throws not-found
 *                 a learner                    → throws bad-request
 *                 already leads                → answer already-leader
 *                 did not answer its status    → throws unsafe
 *                 otherwise                    → move-leader to it
 *   {}: this pod's member does not lead        → answer not-leader
 *       no other healthy voter                 → throws unsafe
 *       otherwise                              → move-leader to the most up-to-date healthy voter
 *
 * After a MoveLeader of this call (even one whose answer was lost) "nothing to do" answers
 * `transferred`: the move worked.
 */
import { AgentError } from '../proto/errors';
import type { MemberList } from '../proto/types';
import { requireQuorum, type Answer, type NeedsProbe, type Sent } from './answer';
import { describeMember } from './match';
import type { ClusterProbe, MemberProbe } from './probe';

/** A transfer's next step: answer, look at the members first, or move leadership. */
export type TransferDecision =
  { kind: 'answer'; answer: Answer } | NeedsProbe | { kind: 'move-leader'; from: MemberProbe; to: MemberProbe };

/** Decides a transfer to `to` (a member name), or away from `self` (this pod's member name) when `to` is absent. */
export function decideTransfer(
  target: { to?: string; self: string },
  list: MemberList,
  probe: ClusterProbe | undefined,
  sent: Sent,
): TransferDecision {
  if (probe === undefined) return { kind: 'probe' };
  requireQuorum(probe);
  const leader = probe.leader;
  if (leader === undefined) throw new AgentError('unavailable', 'no member reports a leader');
  const moved = sent.has('move-leader');
  const answer = (outcome: 'already-leader' | 'not-leader' | 'transferred', by: MemberProbe): TransferDecision => ({
    kind: 'answer',
    answer: { outcome, complete: true, list, leader: { id: by.member.id, name: by.member.name }, leaderTransferred: moved },
  });

  if (target.to !== undefined) {
    const to = list.members.find((m) => m.started && m.name === target.to);
    if (to === undefined) throw new AgentError('not-found', `no started member named ${target.to}`);
    if (to.isLearner) throw new AgentError('bad-request', `${target.to} is a learner; leadership can only move to a voter`);
    if (leader.member.id === to.id) return answer(moved ? 'transferred' : 'already-leader', leader);
    const successor = probe.of(to.id);
    if (successor?.status === undefined) {
      throw new AgentError(
        'unsafe',
        `${describeMember(to)} did not answer a status call; leadership stays with ${describeMember(leader.member)}`,
      );
    }
    return { kind: 'move-leader', from: leader, to: successor };
  }

  const self = list.members.find((m) => m.started && m.name === target.self);
  if (self === undefined || leader.member.id !== self.id) return answer(moved ? 'transferred' : 'not-leader', leader);
  const successor = probe.mostUpToDate(self.id);
  if (successor === undefined)
    throw new AgentError('unsafe', `no other healthy voter can take over leadership from ${describeMember(self)}`);
  return { kind: 'move-leader', from: leader, to: successor };
}

/** The answer once leadership has moved to `to`. */
export function transferredTo(list: MemberList, to: MemberProbe): Answer {
  return { outcome: 'transferred', complete: true, list, leader: { id: to.member.id, name: to.member.name }, leaderTransferred: true };
}
