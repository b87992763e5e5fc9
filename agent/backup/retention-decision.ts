/**
 * Which backups retention removes (pure). A backup is kept while it is one of the newest `keepLast`,
 * or younger than `keepForSeconds`; with neither set, every backup is kept. Whatever the settings, the
 * newest verified backup is never removed: it is the one a restore would use, and removing it for
 * newer ones that may not restore would leave nothing proven. An orphan, a snapshot without a
 * manifest (a killed run's) or a manifest without a snapshot (a verification that overlapped the
 * backup's removal), is removed once it is older than `orphanGraceSeconds`, so a run writing its
 * manifest right now is never raced.
 */
import type { VerificationState } from '../proto/backup';

/** What retention keeps. */
export interface RetentionPolicy {
  keepLast?: number;
  keepForSeconds?: number;
  orphanGraceSeconds: number;
}

/** A backup as retention sees it. */
export interface RetainedBackup {
  name: string;
  state: VerificationState;
  finishedAt: Date;
}

/** What to remove, and why each kept one stays when a rule alone would have removed it. */
export interface RetentionDecision {
  remove: string[];
  removeOrphans: string[];
  /** Kept only because it is the newest verified backup. */
  keptAsNewestVerified?: string;
}

/** Decides what retention removes from `backups` (any order) and the orphans (key, time). */
export function decideRetention(
  backups: RetainedBackup[],
  orphans: { key: string; modifiedAt: Date }[],
  policy: RetentionPolicy,
  now: Date,
): RetentionDecision {
  const newestFirst = [...backups].sort((a, b) => (a.name < b.name ? 1 : a.name > b.name ? -1 : 0));
  const newestVerified = newestFirst.find((b) => b.state === 'verified')?.name;
  const removeOrphans = orphans.filter((o) => now.getTime() - o.modifiedAt.getTime() > policy.orphanGraceSeconds * 1000).map((o) => o.key);
  if (policy.keepLast === undefined && policy.keepForSeconds === undefined) return { remove: [], removeOrphans };
  const remove: string[] = [];
  let keptAsNewestVerified: string | undefined;
  newestFirst.forEach((b, i) => {
    const byCount = policy.keepLast !== undefined && i < policy.keepLast;
    const byAge = policy.keepForSeconds !== undefined && now.getTime() - b.finishedAt.getTime() <= policy.keepForSeconds * 1000;
    if (byCount || byAge) return;
    if (b.name === newestVerified) keptAsNewestVerified = b.name;
    else remove.push(b.name);
  });
  return { remove: remove.reverse(), removeOrphans, ...(keptAsNewestVerified === undefined ? {} : { keptAsNewestVerified }) };
}
