/**
 * Whether this pod's new member needs one write through the quorum before it can serve (docs/api.md
 * §4, join: a learner is promoted by its own pod's agent once in sync). Pure.
 *
 * A member that joins receives the leader's snapshot, restores it, and must then publish itself
 * through raft before it serves any client. etcd refuses that publish ("too many requests") while
 * the member's applied index trails the commit index it has learned by more than its limit (5,000
 * entries), and only a new entry makes it apply further. On a cluster nothing writes to, no entry
 * comes: the member serves nothing, is never in sync by its own account, and is never promoted,
 * leaving the cluster without the fault tolerance the join was for. One harmless write through the
 * quorum appends that entry (etcd-io/etcd#16436 shows the same refusal).
 *
 *   the local etcd answers                                → nothing
 *   silent for less than NUDGE_AFTER_MS                   → wait (it may be starting, or restoring)
 *   the member list could not be read through the voters  → wait
 *   this pod's member is not listed, or is a started voter → nothing (not a member that is joining)
 *   listed as a learner or unstarted, nudged recently     → wait
 *   listed as a learner or unstarted                      → nudge
 */
import type { Member } from '../proto/types';

/** How long the local etcd must have been silent before a nudge: longer than a restart or a restore takes to begin serving. */
export const NUDGE_AFTER_MS = 3000;
/** The shortest time between two nudges: one entry is enough, so further ones only cover a lost one. */
export const NUDGE_EVERY_MS = 10_000;

/** What the decision knows. `listed` is this pod's member in the voters' list, `null` when it is absent, undefined when unread. */
export interface NudgeFacts {
  /** How long the local etcd has not answered; undefined when its last look answered. */
  localSilentForMs: number | undefined;
  listed: Member | null | undefined;
  /** How long ago the last nudge was written; undefined when none was. */
  sinceLastNudgeMs: number | undefined;
}

/** The next step: nothing to do, wait and look again, or write once through the quorum. */
export type NudgeDecision = 'nothing' | 'wait' | 'nudge';

/** Decides; see the table above. */
export function decideNudge(facts: NudgeFacts): NudgeDecision {
  if (facts.localSilentForMs === undefined) return 'nothing';
  if (facts.localSilentForMs < NUDGE_AFTER_MS) return 'wait';
  if (facts.listed === undefined) return 'wait';
  if (facts.listed === null || (facts.listed.started && !facts.listed.isLearner)) return 'nothing';
  return nudgeMayBeDue(facts) ? 'nudge' : 'wait';
}

/** Whether a nudge would be due if this pod's member were joining: the local etcd silent long enough, the last nudge long enough ago. */
export function nudgeMayBeDue(facts: Omit<NudgeFacts, 'listed'>): boolean {
  if (facts.localSilentForMs === undefined || facts.localSilentForMs < NUDGE_AFTER_MS) return false;
  return facts.sinceLastNudgeMs === undefined || facts.sinceLastNudgeMs >= NUDGE_EVERY_MS;
}
