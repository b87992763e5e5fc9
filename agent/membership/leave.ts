/**
 * POST /v1/members/leave (CONTRACT §4): remove a member, safely, any number of
 * times. The member is found in the member list by id, name or peer URL; the
 * leaving member itself is never needed (its etcd may be down or already gone).
 *
 *   no matching member                 → nothing                              already-absent
 *   learner or unstarted member        → MemberRemove                         removed
 *   voter, quorum stays healthy        → MoveLeader first if it leads, then MemberRemove   removed
 *   voter, quorum would not            → nothing unless force                 409 unsafe
 *   the last voter                     → nothing, even with force             409 unsafe
 *
 * A crash between the steps (the Cluster API incident) is recovered by the
 * next call: it reads the list again and does only what is still missing.
 */
import { isMemberNotFound } from '../etcd/errors';
import type { HeldLock } from '../etcd/held-lock';
import { AgentError } from '../proto/errors';
import type { LeaveRequest } from '../proto/requests';
import type { ActionResult, Member, MemberList } from '../proto/types';
import { matchMember, MatchWanted, toConflictError } from './match';
import type { MemberProbe } from './probe';
import { checkRemoval } from './quorum';
import { ActionRun, Answer, describeMember, etcdSaid, requestedPeerURLs, withMember } from './run';

/** Polling interval while waiting for the new leader to take over. */
const LEADER_POLL_MS = 50;

function find(list: MemberList, wanted: MatchWanted): Member | undefined {
  const found = matchMember(list.members, wanted);
  if (found.kind === 'conflict') throw toConflictError(found);
  return found.kind === 'match' ? found.member : undefined;
}

/** Removes the member `req` names; see the table above. */
export async function leave(run: ActionRun, req: LeaveRequest): Promise<ActionResult> {
  const wanted: MatchWanted =
    req.id !== undefined
      ? { id: req.id, peerURLs: [] }
      : { name: req.name, peerURLs: requestedPeerURLs(run.deps.config, req.name ?? '', req.peerURLs) };
  // The member this call has sent MemberRemove for: a `removed` answer always names it, also when
  // the remove's answer was lost and the next read finds the member gone.
  let removing: Member | undefined;

  const list = await run.readMembers();
  const target = find(list, wanted);
  if (target === undefined) return run.answer(answerWhenGone(list, undefined));

  const intent = { action: run.action, member: { name: target.name || (req.name ?? ''), peerURLs: target.peerURLs } };
  return run.underLock(intent, (held) =>
    run.converge(async () => {
      const again = await run.readMembers();
      const member = find(again, wanted);
      if (member === undefined) return run.answer(answerWhenGone(again, removing));
      if (member.started && !member.isLearner) await makeVoterRemovable(run, held, again, member, req.force === true);

      const sentBefore = removing?.id === member.id ? removing : undefined;
      removing = member;
      try {
        await run.send(held, 'remove', member, () => run.deps.cluster.removeMember(member.id, run.deadline));
      } catch (err) {
        // Gone between our read and our remove: someone else finished the job (or our own earlier
        // attempt in this call did, and its answer was lost).
        if (etcdSaid(err, isMemberNotFound)) return run.answer(answerWhenGone(withMember(again, member, true), sentBefore));
        throw err;
      }
      return run.answer({ outcome: 'removed', complete: true, member, list: withMember(again, member, true) });
    }),
  );
}

/**
 * The answer once the member is not (or no longer) in `list`: `removed`, naming it, when this call
 * sent its MemberRemove (`removed`; its answer may have been lost), else `already-absent`. Pure.
 */
export function answerWhenGone(list: MemberList, removed: Member | undefined): Answer {
  if (removed === undefined) return { outcome: 'already-absent', complete: true, list };
  return { outcome: 'removed', complete: true, member: removed, list: withMember(list, removed, true) };
}

/**
 * Checks that removing voter `member` keeps a healthy quorum (or that `force` overrides it), and
 * when it leads, hands leadership to the most up-to-date healthy voter first.
 */
async function makeVoterRemovable(run: ActionRun, held: HeldLock, list: MemberList, member: Member, force: boolean): Promise<void> {
  const probe = await run.probe(list.members);
  const verdict = checkRemoval({
    voters: probe.voters.length,
    healthyVoters: probe.healthyVoters,
    startedVoters: probe.voters.filter((v) => v.started).length,
    target: { name: member.name || describeMember(member), isVoter: true, healthy: probe.isHealthy(member.id) },
  });
  if (!verdict.safe) {
    if (!verdict.forceable || !force) {
      const hint = verdict.forceable ? '; force: true removes it anyway' : '';
      throw new AgentError('unsafe', `${verdict.message}${hint}`, { details: { ...verdict.details, forceable: verdict.forceable } });
    }
    run.deps.logger.warn('removing a voter without a healthy quorum, as forced', {
      member: describeMember(member),
      reason: verdict.message,
      requestId: run.context.requestId,
    });
  }

  const leader = probe.leader;
  const from = probe.of(member.id);
  if (leader?.member.id !== member.id) {
    // A MoveLeader of an earlier attempt whose answer was lost may have worked: count it.
    if (run.sent.has('move-leader') && leader !== undefined) run.leaderTransferred = true;
    return;
  }
  if (from?.status === undefined || from.url === undefined) return;
  const to = probe.mostUpToDate(member.id);
  // With no healthy voter to take over (only possible when forced) etcd elects one after the removal.
  if (to === undefined) return;
  await moveLeadership(run, held, from, to);
}

/**
 * MoveLeader from `from` (the leader, asked at its own client URL as etcd requires) to `to`,
 * then waits until `to` reports a leader other than `from`.
 */
export async function moveLeadership(run: ActionRun, held: HeldLock, from: MemberProbe, to: MemberProbe): Promise<void> {
  const fromUrl = from.url;
  const toUrl = to.url;
  if (fromUrl === undefined || toUrl === undefined) {
    throw new AgentError('unavailable', 'the leader or its successor has no client URL to reach it at');
  }
  await run.send(held, 'move-leader', to.member, () => run.deps.cluster.moveLeader(fromUrl, to.member.id, run.deadline));
  run.leaderTransferred = true;
  for (;;) {
    try {
      const status = await run.deps.cluster.memberStatus(toUrl, run.statusTimeoutMs());
      if (status.leaderId !== '0' && status.leaderId !== from.member.id) return;
    } catch {
      // not answering this instant: ask again
    }
    await run.deadline.sleep(LEADER_POLL_MS, `waiting for ${describeMember(to.member)} to take over leadership`);
  }
}
