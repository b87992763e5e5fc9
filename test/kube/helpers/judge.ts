/**
 * Judgements over a story's records (observe.ts): pure functions of what was seen, in the order it
 * was seen. Each answers the evidence behind a verdict, so a failing assertion shows it.
 */
import type { EtcdRecord, HealthRecord, PodRecord } from './observe';

/** A stretch of time, [from, to], in ms since the epoch. */
export interface Interval {
  name: string;
  from: number;
  to: number;
}

/** The member lists etcd gave that held more than `most` learners. */
export function memberListsWithLearners(records: EtcdRecord[], most: number): EtcdRecord[] {
  return records.filter((r) => r.members !== undefined && r.members.filter((m) => m.isLearner).length > most);
}

/** Every cluster id any etcd answered with, and how many answers gave each. */
export function clusterIds(records: EtcdRecord[]): Map<string, number> {
  const ids = new Map<string, number>();
  for (const r of records) if (r.clusterId !== undefined) ids.set(r.clusterId, (ids.get(r.clusterId) ?? 0) + 1);
  return ids;
}

/**
 * For each pod that was replaced (a pod of the same name with another uid came after it): from the
 * first moment it was seen going (being deleted, or no longer Ready after it had been) to the first
 * moment its replacement was seen Ready. A pod still going at the end runs to `end`.
 */
export function podDownIntervals(records: PodRecord[], end: number): Interval[] {
  const byName = new Map<string, PodRecord[]>();
  for (const r of records) byName.set(r.name, [...(byName.get(r.name) ?? []), r]);
  const intervals: Interval[] = [];
  for (const [name, rs] of byName) {
    const uids = [...new Set(rs.map((r) => r.uid))];
    for (const uid of uids) {
      const own = rs.filter((r) => r.uid === uid);
      let wasReady = false;
      let from: number | undefined;
      for (const r of own) {
        if (r.ready) wasReady = true;
        if (from === undefined && (r.deleting || (wasReady && !r.ready))) from = r.at;
      }
      if (from === undefined) continue;
      const back = rs.find((r) => r.at >= from && r.uid !== uid && r.ready && !r.deleting && uids.indexOf(r.uid) > uids.indexOf(uid));
      // The same pod Ready again (a probe that failed for a while) ends it too.
      const again = own.find((r) => r.at > from && r.ready && !r.deleting);
      const to = Math.min(back?.at ?? end, again?.at ?? end);
      intervals.push({ name, from, to });
    }
  }
  return intervals.sort((a, b) => a.from - b.from);
}

/** Pairs of intervals of different names that overlap. */
export function overlapping(intervals: Interval[]): Array<[Interval, Interval]> {
  const pairs: Array<[Interval, Interval]> = [];
  for (let i = 0; i < intervals.length; i++)
    for (let j = i + 1; j < intervals.length; j++) {
      const [a, b] = [intervals[i], intervals[j]];
      if (a.name !== b.name && a.from < b.to && b.from < a.to) pairs.push([a, b]);
    }
  return pairs;
}

/**
 * When each member was surely not answering. A failed etcd status call to a pod says that pod's
 * etcd was not answering when the failure came back: a member that stops may still answer another
 * caller's call sent a moment before, so the silence is counted from the failure, not from the send.
 * It speaks for the member only until a newer pod of the same name was seen: from then on the member
 * may answer there. A run of such failures of one pod name, no answer of that name in between, is
 * one silence, from the first failure to the end of the last one's evidence. Silences that start before `after` (a member
 * not up yet at the start) are left out.
 */
export function silentIntervals(records: EtcdRecord[], pods: PodRecord[], after: number): Interval[] {
  const firstSeen = new Map<string, { name: string; at: number }>();
  for (const p of pods) if (!firstSeen.has(p.uid)) firstSeen.set(p.uid, { name: p.name, at: p.at });
  /** When a newer pod of the name of `uid` was first seen (Infinity: none). */
  const supersededAt = (uid: string): number => {
    const own = firstSeen.get(uid);
    if (own === undefined) return Infinity;
    const newer = [...firstSeen.values()].filter((f) => f.name === own.name && f.at > own.at).map((f) => f.at);
    return Math.min(Infinity, ...newer);
  };
  const byName = new Map<string, EtcdRecord[]>();
  for (const r of records) byName.set(r.pod, [...(byName.get(r.pod) ?? []), r]);
  const intervals: Interval[] = [];
  for (const [name, rs] of byName) {
    const sorted = [...rs].sort((a, b) => a.sentAt - b.sentAt);
    let run: Interval | undefined;
    const close = (): void => {
      if (run !== undefined && run.from >= after) intervals.push(run);
      run = undefined;
    };
    for (const r of sorted) {
      if (r.clusterId !== undefined) {
        close();
        continue;
      }
      const to = Math.min(r.at, supersededAt(r.podUid));
      if (to < r.sentAt) continue;
      run = run === undefined ? { name, from: Math.min(r.at, to), to } : { name, from: run.from, to: Math.max(run.to, to) };
    }
    close();
  }
  return intervals.sort((a, b) => a.from - b.from);
}

/**
 * The `healthy` answers whose whole observation fell while a member was surely silent: the
 * observation started (`observedAt`) inside the silence and its answer came back before the
 * silence ended. Such an answer vouched for a member that could not have answered.
 */
export function healthyWhileSilent(health: HealthRecord[], silent: Interval[]): Array<{ answer: HealthRecord; silent: Interval }> {
  const found: Array<{ answer: HealthRecord; silent: Interval }> = [];
  for (const answer of health) {
    if (answer.status !== 'healthy' || answer.observedAt === undefined) continue;
    const during = silent.find((s) => s.from <= answer.observedAt! && answer.at <= s.to);
    if (during !== undefined) found.push({ answer, silent: during });
  }
  return found;
}

/**
 * For each pod that went: the latest `healthy` observation that started after it was seen going
 * and before its member was first seen silent, and how long after it was seen going. That is what
 * `/v1/health` said of a member whose pod was terminating but whose etcd still answered.
 */
export function healthyWhileGoing(
  health: HealthRecord[],
  going: Interval[],
  silent: Interval[],
): Array<{ going: Interval; lateMs: number; answers: number }> {
  return going.flatMap((g) => {
    const quiet = silent.find((s) => s.name === g.name && s.from >= g.from && s.from <= g.to);
    const until = quiet?.from ?? g.to;
    const inside = health.filter(
      (h) => h.status === 'healthy' && h.observedAt !== undefined && h.observedAt >= g.from && h.observedAt < until,
    );
    if (inside.length === 0) return [];
    return [{ going: g, lateMs: Math.max(...inside.map((h) => h.observedAt! - g.from)), answers: inside.length }];
  });
}
