/**
 * Which of the data directories prepare moved aside (`<data dir>.removed-<UTC time>[-n]`,
 * etcd-data/data-dir.ts `moveAside`) are removed now, and why each is kept or removed. Pure.
 *
 * A directory moved aside holds a member the cluster removed, or files etcd could not use. The
 * cluster that removed the member (read through a quorum when it was moved) had every write that
 * member had acknowledged, so the copy is needed only if the move was wrong, or if that cluster is
 * lost later and a person goes back to an old copy; unusable files are there for a person to look at.
 * The newest copy is the one a person would go back to, so it is kept until the member is back for
 * good; every copy goes once a person has had a week to look at it, and at most two are kept, so that
 * copies of a member moved aside again and again never fill the volume etcd writes to.
 *
 *   not one of prepare's names, or not a directory     → never touched
 *   the newest, and this pod's member not a started
 *   voter again with the current data directory        → kept, whatever its age or the count
 *   older than ASIDE_MAX_AGE_MS (7 days)               → removed
 *   beyond the ASIDE_KEEP (2) newest                   → removed
 *   otherwise                                          → kept, until its age or the count removes it
 *
 * The current data directory is newer than every copy (each was renamed away from its path), so a
 * member that is a started voter with it has caught up with the cluster since the newest copy was made.
 */
import type { DataDirState } from '../etcd-data/data-dir';
import type { MemberList } from '../proto/types';

/** How long a directory moved aside is kept at most, once it is not the newest one still needed. */
export const ASIDE_MAX_AGE_MS = 7 * 24 * 3600 * 1000;
/** How many directories moved aside are kept at most (the newest still needed counts among them). */
export const ASIDE_KEEP = 2;

/** One directory prepare moved aside: its name beside the data directory and when it was moved. */
export interface Aside {
  name: string;
  movedAt: Date;
  /** The `-n` of a second move in the same second (0 for none): orders moves within a second. */
  seq: number;
}

/** What the rule is decided from. */
export interface AsideFacts {
  asides: readonly Aside[];
  nowMs: number;
  /** This pod's member is a started voter of the cluster, with the current data directory. */
  voterAgain: boolean;
}

/** Each directory's fate, with the reason a log line gives. */
export interface AsideVerdict {
  name: string;
  action: 'keep' | 'remove';
  why: string;
}

/** `20250102T030405Z` → its Date; undefined for anything moveAside would not have written. */
function stampDate(stamp: string): Date | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(stamp);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1).map(Number);
  const date = new Date(Date.UTC(year, month - 1, day, hour, minute, second));
  // Date.UTC rolls a 13th month or a 61st second over: written back, such a stamp differs.
  const written = date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  return written === stamp ? date : undefined;
}

/** The aside that `entry` (a name beside the data directory `base`) is, or undefined when it is not one of prepare's. */
export function parseAside(base: string, entry: string): Aside | undefined {
  const prefix = `${base}.removed-`;
  if (!entry.startsWith(prefix)) return undefined;
  const m = /^(\d{8}T\d{6}Z)(?:-([1-9]\d{0,5}))?$/.exec(entry.slice(prefix.length));
  const movedAt = m === null ? undefined : stampDate(m[1]);
  if (m === null || movedAt === undefined) return undefined;
  return { name: entry, movedAt, seq: m[2] === undefined ? 0 : Number(m[2]) };
}

/** The member of the current data directory is a started voter in a member list read through a quorum. */
export function isVoterAgain(dataDir: DataDirState, list: MemberList | undefined): boolean {
  if (dataDir.kind !== 'member' || list === undefined || list.clusterId !== dataDir.clusterId) return false;
  const member = list.members.find((m) => m.id === dataDir.memberId);
  return member !== undefined && member.started && !member.isLearner;
}

/** Decides each aside's fate; see the table above. Newest first. */
export function decideAsides(f: AsideFacts): AsideVerdict[] {
  const newestFirst = [...f.asides].sort((a, b) => b.movedAt.getTime() - a.movedAt.getTime() || b.seq - a.seq);
  return newestFirst.map((aside, index): AsideVerdict => {
    const ageMs = f.nowMs - aside.movedAt.getTime();
    if (index === 0 && !f.voterAgain) {
      return { name: aside.name, action: 'keep', why: 'the newest, kept until this member is a started voter again' };
    }
    if (ageMs > ASIDE_MAX_AGE_MS) {
      return { name: aside.name, action: 'remove', why: `moved aside ${days(ageMs)} ago, longer than ${days(ASIDE_MAX_AGE_MS)}` };
    }
    if (index >= ASIDE_KEEP) {
      return { name: aside.name, action: 'remove', why: `${ASIDE_KEEP} newer ones are kept, and no more` };
    }
    return { name: aside.name, action: 'keep', why: `moved aside ${days(ageMs)} ago; kept for ${days(ASIDE_MAX_AGE_MS)}` };
  });
}

/** A duration as a person reads it: `7 days`, `3.5 days`, `5 hours`. */
function days(ms: number): string {
  const hours = Math.round(Math.max(0, ms) / 3_600_000);
  if (hours < 48) return hours === 1 ? '1 hour' : `${hours} hours`;
  return `${Math.round((hours / 24) * 10) / 10} days`;
}
