/**
 * Why a defragmentation run waits before its next look, and how long each kind of wait may last.
 * Pure: the decision (defrag-decision.ts) names the reason, the run's wait step
 * (defrag-steps.ts `waitFor`) keeps its clock.
 *
 *   defragmenting   a member's own gauge says a Defragment is running   up to DEFRAG_MEMBER_TIMEOUT_MS
 *                   (this run's, an earlier agent's, someone's etcdctl)
 *   catching-up     the member this run just defragmented has not       up to DEFRAG_CATCH_UP_MAX_MS
 *                   applied what the leader committed meanwhile
 *   compacting      a voter has not finished this run's compaction, or   up to DEFRAG_COMPACTION_SETTLE_MAX_MS
 *                   its in-use size does not show it yet
 *                   (compaction-settle.ts)
 *
 * A running Defragment is waited for as long as its RPC's own deadline, since etcd goes on after a
 * client gives up. A wait's clock starts when its reason first appears and starts again when the
 * reason changes (`sameWait`): a member catching up (or compacting) changes its reason at each look
 * that finds it further on, so the limit bounds a member that has stopped, not a long backlog
 * applied steadily. A wait past its limit ends the run (`unavailable`, call again).
 */
import { DEFRAG_CATCH_UP_MAX_MS, DEFRAG_COMPACTION_SETTLE_MAX_MS, DEFRAG_MEMBER_TIMEOUT_MS } from '../config/timings';
import { describeMember } from '../membership/match';
import type { Member } from '../proto/types';

/** Why the run waits for a member. */
export type WaitReason =
  /** Its etcd_disk_defrag_inflight is 1: never a second Defragment beside it. */
  | { kind: 'defragmenting' }
  /** Its applied index is below the leader's committed index read right after its Defragment. */
  | { kind: 'catching-up'; appliedIndex: number; catchUpIndex: number }
  /**
   * It has not finished this run's compaction (no `commitsLeft`), or has and its backend must commit
   * `commitsLeft` more times before its in-use size shows it; `commits` is its backend commit count.
   */
  | { kind: 'compacting'; commits: number; commitsLeft?: number };

/** A wait: the member waited for, and why. */
export interface Wait {
  member: Member;
  reason: WaitReason;
}

/** The longest each kind of wait may last before the run ends. */
const WAIT_LIMIT_MS: Readonly<Record<WaitReason['kind'], number>> = {
  defragmenting: DEFRAG_MEMBER_TIMEOUT_MS,
  'catching-up': DEFRAG_CATCH_UP_MAX_MS,
  compacting: DEFRAG_COMPACTION_SETTLE_MAX_MS,
};

/** The longest a wait for `reason` may last, by its kind. */
export function waitLimitMs(reason: WaitReason): number {
  return WAIT_LIMIT_MS[reason.kind];
}

/** The wait in words, as the run's step (`waiting: …`) and its refusal say it. */
export function describeWait({ member, reason }: Wait): string {
  switch (reason.kind) {
    case 'defragmenting':
      return `${describeMember(member)} is being defragmented now (etcd_disk_defrag_inflight 1)`;
    case 'catching-up':
      return `${describeMember(member)} is applying what it missed while it was defragmented (${reason.appliedIndex} of ${reason.catchUpIndex})`;
    case 'compacting':
      return reason.commitsLeft === undefined
        ? `${describeMember(member)} has not finished the compaction yet`
        : `${describeMember(member)} finished the compaction; its in-use size shows it after ${reason.commitsLeft} more commit${reason.commitsLeft === 1 ? '' : 's'} of its backend`;
  }
}

/** True when `a` and `b` are the same wait: the same member, the same kind, the same figures. */
export function sameWait(a: Wait, b: Wait): boolean {
  if (a.member.id !== b.member.id || a.member.name !== b.member.name || a.reason.kind !== b.reason.kind) return false;
  if (a.reason.kind === 'catching-up' && b.reason.kind === 'catching-up') {
    return a.reason.appliedIndex === b.reason.appliedIndex && a.reason.catchUpIndex === b.reason.catchUpIndex;
  }
  if (a.reason.kind === 'compacting' && b.reason.kind === 'compacting') {
    return a.reason.commits === b.reason.commits && a.reason.commitsLeft === b.reason.commitsLeft;
  }
  return true;
}
