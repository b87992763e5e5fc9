/**
 * When each revision was current, as far as this agent has seen: what turns a compaction retention
 * given as a duration ("keep the last 6 h") into a revision. etcd keeps no such record, so the agent
 * keeps one from the headers of the Status answers it gets anyway (its auto-promotion loop asks its
 * own member once a second). Pure: samples go in, a revision comes out.
 *
 * Invariant: `revisionAt(t)` is a revision that was current at or before `t`, or undefined. Compacting
 * to it therefore keeps every revision made since `t` (and perhaps a little more): a retention is never
 * cut short. An agent younger than the retention knows no such revision and answers undefined (the
 * run then skips the compaction and says why).
 */

/** One sample: the revision a member reported at a time (epoch milliseconds). */
export interface RevisionSample {
  at: number;
  revision: number;
}

/**
 * At most this many samples. When full, the sample whose removal leaves the smallest gap relative to
 * its age goes, so the samples spread geometrically: an answer about a time T ago is within a few
 * per cent of T, whether T is a minute or a month.
 */
const MAX_SAMPLES = 512;
/** Samples closer together than this replace each other (the newest stays). */
const MIN_SPACING_MS = 1000;

/** The samples, oldest first. */
export class RevisionHistory {
  private samples: RevisionSample[] = [];

  /** Takes in that `revision` was current at `at`; out-of-order and lower revisions (a lagging member) are ignored. */
  add(at: number, revision: number): void {
    if (!Number.isFinite(revision) || revision <= 0) return;
    const last = this.samples.at(-1);
    if (last !== undefined && (at < last.at || revision < last.revision)) return;
    if (last !== undefined && at - last.at < MIN_SPACING_MS && this.samples.length > 1) {
      // Keep the first sample of each second: its time is the earliest at which its revision was seen.
      return;
    }
    this.samples.push({ at, revision });
    if (this.samples.length > MAX_SAMPLES) this.thin(at);
  }

  /** Removes the one inner sample whose gap, relative to its age at `now`, would be the smallest. */
  private thin(now: number): void {
    let best = -1;
    let bestCost = Infinity;
    for (let i = 1; i < this.samples.length - 1; i++) {
      const gap = this.samples[i + 1].at - this.samples[i - 1].at;
      const cost = gap / (now - this.samples[i + 1].at + MIN_SPACING_MS);
      if (cost < bestCost) [best, bestCost] = [i, cost];
    }
    if (best > 0) this.samples.splice(best, 1);
  }

  /** A revision that was current at or before `at` (the newest such sample), or undefined when none is that old. */
  revisionAt(at: number): number | undefined {
    let found: number | undefined;
    for (const s of this.samples) {
      if (s.at > at) break;
      found = s.revision;
    }
    return found;
  }

  /** The time of the oldest sample (epoch ms), or undefined. */
  oldest(): number | undefined {
    return this.samples[0]?.at;
  }

  /** How many samples are kept. */
  get size(): number {
    return this.samples.length;
  }
}
