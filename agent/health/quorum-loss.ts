/**
 * How long this agent has seen the quorum lost: the start of the current unbroken stretch of
 * observations that found no quorum. Pure: it is fed each finished observation (the observer does),
 * and answers from what it was fed.
 *
 * Invariant: the stretch only ever counts what was seen. It starts at the first observation that
 * found the quorum lost; an observation that found a quorum ends it; and so does a gap between two
 * observations longer than `maxGapMs` (nobody looked: the quorum may have come back and gone again
 * unseen), after which it starts again at the next observation that finds it lost. An observation
 * that finished too late (`unknown`) may have cut its calls short: when it found no quorum it is
 * evidence of nothing and counts as a gap; when it found one, a quorum did answer, and it ends the
 * stretch.
 */

/**
 * The longest gap between two observations that still counts as one unbroken look. The recovery
 * service observes once a second while the quorum is lost; readiness probes and scrapes look every
 * 5–30 s on their own.
 */
export const QUORUM_LOSS_MAX_GAP_MS = 15_000;

/** One finished observation, as the clock needs it. */
export interface QuorumSighting {
  /** Wall-clock milliseconds when the observation started. */
  at: number;
  /** true: a quorum of voters answered; false: it did not; undefined: no evidence (a late observation that found none). */
  hasQuorum: boolean | undefined;
}

/** The quorum-loss stretch this agent has seen. */
export class QuorumLossClock {
  private lostSince?: number;
  private lastSeen?: number;

  constructor(private readonly maxGapMs: number) {}

  /** Takes one observation into account. */
  see(s: QuorumSighting): void {
    if (s.hasQuorum === undefined) return;
    const gap = this.lastSeen === undefined ? 0 : s.at - this.lastSeen;
    if (s.at < (this.lastSeen ?? -Infinity)) return;
    this.lastSeen = s.at;
    if (s.hasQuorum) {
      this.lostSince = undefined;
    } else if (this.lostSince === undefined || gap > this.maxGapMs) {
      this.lostSince = s.at;
    }
  }

  /** Whether the last observation that counted found the quorum lost (however long ago). */
  lastSawLoss(): boolean {
    return this.lostSince !== undefined;
  }

  /** Since when the quorum has been seen lost without a break (wall-clock ms), or undefined when it is not lost. */
  since(now: number): number | undefined {
    if (this.lostSince === undefined || this.lastSeen === undefined) return undefined;
    // A stretch nobody has looked at for longer than the gap rule allows is no longer evidence.
    return now - this.lastSeen > this.maxGapMs ? undefined : this.lostSince;
  }
}
