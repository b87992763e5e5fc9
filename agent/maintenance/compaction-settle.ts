/**
 * Whether each voter has finished the compaction this run made, and its in-use size shows it, before
 * the run decides which member is to do. Pure.
 *
 * A Compact is applied by every member, which then drops the old revisions in the background; the
 * physical Compact answers only for the member that served it. The space they held counts as free in
 * Status' `dbSizeInUse` only once the member's backend has committed the deletes and bolt has released
 * the pages. The count of finished compactions moves before the last deletes are committed (commit 1).
 * bolt releases a committed transaction's pages when the next write transaction begins and no older
 * read transaction is open (etcd closes its previous one asynchronously), and bolt's free-page count
 * moves when that transaction ends (commit 2). etcd takes the in-use size from that count as it
 * begins the transaction after (the count of commits moves just before that): a third commit proves
 * the size was taken. The gauges are read before the Status (defrag-look.ts), so the Status is at
 * least as new as the commits counted.
 * Decided earlier, a follower still counts the dropped history as in use and looks tidy, and the
 * leader, already over the thresholds, would be defragmented before it.
 *
 * A member's own gauges show both steps (3.4 to 3.7): the count of finished compactions
 * (`etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count`) and the count of backend
 * commits (`etcd_disk_backend_commit_duration_seconds_count`).
 *
 *   right before the Compact, each voter's count of finished compactions is noted  `marksBefore`
 *   a look finds that count changed: the voter's commit count then is noted       `advanceMarks`
 *   settled once SETTLE_COMMITS commits followed that note                         `unsettled`
 *   a gauge missing or unreadable, or a counter lower than noted (the member       settled: decided from
 *   restarted, and what it reports now is what its disk holds)                      its Status as it is
 *
 * Commits need writes: the run's wait step records itself in the operation record each time the
 * wait's figures change, a write every member applies and commits. A count only says that some
 * compaction finished: one that was already running when this run's was applied (etcd's
 * auto-compaction) moves it early, and a long read holding etcd's previous read transaction open
 * delays the release by as many commits as it lasts; the decision is then as good as the Status it
 * reads.
 */
import type { MetricsAnswer } from '../etcd/member-metrics';
import type { MemberProbe } from '../membership/probe';
import type { Member } from '../proto/types';
import type { WaitReason } from './wait-reason';

/** Backend commits after a finished compaction before the space it freed counts as free. */
export const SETTLE_COMMITS = 3;

/** What the run noted of one voter's compaction. */
export interface CompactionMark {
  /** Finished compactions its gauge counted right before this run's Compact. */
  compactionsBefore: number;
  /** Its backend commits at the first look that found its count of finished compactions changed. */
  commitsAtFinish?: number;
}

/** The marks of the voters this run's compaction is waited for, by member id. */
export type CompactionMarks = ReadonlyMap<string, CompactionMark>;

/** Each voter's count of finished compactions, from the look right before the Compact; voters without it are left out. */
export function marksBefore(voters: readonly Member[], metrics: ReadonlyMap<string, MetricsAnswer>): Map<string, CompactionMark> {
  const marks = new Map<string, CompactionMark>();
  for (const v of voters) {
    const m = metrics.get(v.id);
    if (m !== undefined && !('error' in m) && m.compactions !== undefined) marks.set(v.id, { compactionsBefore: m.compactions });
  }
  return marks;
}

/** The marks with the commit count noted for every voter this look finds has finished the compaction. */
export function advanceMarks(marks: CompactionMarks, metrics: ReadonlyMap<string, MetricsAnswer>): Map<string, CompactionMark> {
  const next = new Map(marks);
  for (const [id, mark] of marks) {
    const m = metrics.get(id);
    if (mark.commitsAtFinish !== undefined || m === undefined || 'error' in m) continue;
    if (m.compactions !== undefined && m.compactions !== mark.compactionsBefore && m.commits !== undefined) {
      next.set(id, { ...mark, commitsAtFinish: m.commits });
    }
  }
  return next;
}

/** The first voter (by name) whose compaction has not settled, and why; undefined when all have. */
export function unsettled(
  voters: readonly MemberProbe[],
  marks: CompactionMarks,
  metrics: ReadonlyMap<string, MetricsAnswer>,
): { member: Member; reason: WaitReason } | undefined {
  const sorted = [...voters].sort((x, y) => x.member.name.localeCompare(y.member.name));
  for (const p of sorted) {
    const mark = marks.get(p.member.id);
    const m = metrics.get(p.member.id);
    if (mark === undefined || m === undefined || 'error' in m || m.compactions === undefined || m.commits === undefined) continue;
    if (m.compactions < mark.compactionsBefore) continue;
    if (m.compactions === mark.compactionsBefore) return { member: p.member, reason: { kind: 'compacting', commits: m.commits } };
    // Finished at this very look when no earlier one noted it: its commits count from now.
    const atFinish = mark.commitsAtFinish ?? m.commits;
    if (m.commits < atFinish) continue;
    const left = SETTLE_COMMITS - (m.commits - atFinish);
    if (left > 0) return { member: p.member, reason: { kind: 'compacting', commits: m.commits, commitsLeft: left } };
  }
  return undefined;
}
