/**
 * Which members a health observation asks a second time (observer.ts). Pure.
 *
 * Invariant: an observation never calls the cluster `unavailable` on one round of silence alone
 * while it still has time to ask again. When the voters that answered their Status call are fewer
 * than a quorum, every voter that was asked and did not answer is asked once more, within what is
 * left of the observation's budget: an answer slowed by a busy node, or a channel still
 * reconnecting to a member that has just restarted (gRPC fails such a call at once and etcd3
 * then opens a fresh one), must not read as a member down. With a quorum answering, nothing is
 * asked again: the verdict cannot change for the worse, and a member that is really frozen must
 * not stretch every observation to its whole budget (callers would then wait for one).
 */
import { hasQuorum } from '../membership/quorum';
import type { Member } from '../proto/types';
import { canonicalUrl } from '../proto/urls';
import type { StatusProbe } from './types';

/** Marks a probe that was never sent (the observation had no time left): asking again cannot help either. */
export const NOT_ASKED = 'not asked: the observation had no time left';

/** The client URLs of the voters of `members` to ask again, given the first round's `probes`. */
export function urlsToAskAgain(members: Member[] | undefined, probes: StatusProbe[]): string[] {
  if (members === undefined) return [];
  const byUrl = new Map(probes.map((p) => [canonicalUrl(p.url), p]));
  const voters = members.filter((m) => !m.isLearner);
  const asked = voters.flatMap((m) => {
    const url = m.clientURLs[0];
    const probe = url === undefined ? undefined : byUrl.get(canonicalUrl(url));
    return url === undefined || probe === undefined ? [] : [{ url, probe }];
  });
  if (hasQuorum(voters.length, asked.filter((a) => a.probe.status !== undefined).length)) return [];
  return asked.filter((a) => a.probe.status === undefined && a.probe.error !== NOT_ASKED).map((a) => a.url);
}
