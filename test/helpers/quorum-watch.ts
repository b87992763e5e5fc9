/**
 * The fault-injection test's quorum watch: every few hundred ms, the voters from the member list and
 * each voter's etcd `/health`; it records the longest stretch without a quorum of healthy voters.
 *
 * Invariant: a stretch is measured between health observations, each stamped when its `/health`
 * calls were sent, never from when its sample began. A sample first reads the member list (an
 * etcdctl process; a member frozen after the endpoints were chosen holds it until it continues), so
 * a sample's start can precede what it observes by the whole freeze: stamping the start would count
 * that wait as time without quorum.
 *
 * The longest stretch keeps its story (what each sample in it saw, and the faults the test noted
 * around it), so a run that breaks the bound says what happened instead of only how long.
 */
import type { ListedMember } from './etcd-cluster';

/** What the watch reads. */
export interface QuorumSource {
  /** The member list, asked of members whose own copy of it is current (etcd 3.4 answers from the asked member's copy). */
  list(): Promise<ListedMember[]>;
  /** Whether member `name` answers etcd's `/health` with "true" within `timeoutMs`. */
  healthy(name: string, timeoutMs: number): Promise<boolean>;
  /** Members that must be in every list (a list without one is a problem). */
  required(): ReadonlyArray<{ name: string; peerURL: string }>;
}

/** How often the watch samples, and how patient it is. */
export interface QuorumWatchOptions {
  intervalMs?: number;
  /** The member list is read again when the last one is older than this. */
  listEveryMs?: number;
  healthTimeoutMs?: number;
  /** The clock (tests pass their own). */
  now?: () => number;
}

/** The longest stretch without quorum, and what the watch saw of it. */
export interface GapStory {
  from: number;
  to: number;
  /** One line per sample inside the stretch: offset from its start, then each voter + or -. */
  samples: string[];
  /** The faults the test noted from 2 s before the stretch to its end, with offsets from its start. */
  events: string[];
}

const EVENT_LOOKBACK_MS = 2000;

/** Samples the cluster until stopped; see the module comment. */
export class QuorumWatch {
  longestGapMs = 0;
  samples = 0;
  longestGap?: GapStory;
  readonly problems: string[] = [];
  private list: ListedMember[] = [];
  private lastListAt = Number.NEGATIVE_INFINITY;
  private gap?: { from: number; samples: string[] };
  private readonly events: Array<{ at: number; what: string }> = [];
  private timer?: NodeJS.Timeout;
  private busy = false;
  private readonly intervalMs: number;
  private readonly listEveryMs: number;
  private readonly healthTimeoutMs: number;
  private readonly now: () => number;

  constructor(
    private readonly source: QuorumSource,
    opts: QuorumWatchOptions = {},
  ) {
    this.intervalMs = opts.intervalMs ?? 300;
    this.listEveryMs = opts.listEveryMs ?? 1000;
    this.healthTimeoutMs = opts.healthTimeoutMs ?? 400;
    this.now = opts.now ?? Date.now;
  }

  start(): void {
    this.timer = setInterval(() => void this.sample(), this.intervalMs);
  }

  /** Stops sampling; a stretch still open ends now. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    while (this.busy) await new Promise((resolve) => setTimeout(resolve, 20));
    this.close(this.now());
  }

  /** Records a fault the test injected (or undid), for the story of a stretch around it. */
  note(what: string): void {
    this.events.push({ at: this.now(), what });
  }

  /** The longest stretch as text: when, what each sample saw, which faults were around it. */
  describeLongest(): string {
    const story = this.longestGap;
    if (story === undefined) return 'no stretch without quorum';
    return [
      `longest stretch without quorum: ${story.to - story.from} ms from ${new Date(story.from).toISOString()}`,
      `  samples: ${story.samples.join(' | ')}`,
      `  faults: ${story.events.join(' | ') || 'none noted'}`,
    ].join('\n');
  }

  /** One sample (the timer calls it; tests may call it directly). Skipped while the previous one runs. */
  async sample(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      if (this.now() - this.lastListAt > this.listEveryMs) {
        const list = await this.source.list().catch(() => undefined);
        if (list !== undefined && list.length > 0) {
          this.list = list;
          this.lastListAt = this.now();
          const missing = this.source.required().filter((r) => !list.some((m) => m.peerURLs.includes(r.peerURL)));
          if (missing.length > 0) {
            this.problems.push(`${new Date(this.lastListAt).toISOString()} member list lacks ${missing.map((m) => m.name).join(', ')}`);
          }
        }
      }
      const voters = this.list.filter((m) => !m.isLearner);
      const askedAt = this.now();
      const health = await Promise.all(
        voters.map((v) => (v.name === '' ? Promise.resolve(false) : this.source.healthy(v.name, this.healthTimeoutMs).catch(() => false))),
      );
      this.samples += 1;
      const healthy = health.filter(Boolean).length;
      if (voters.length > 0 && healthy < Math.floor(voters.length / 2) + 1) {
        this.gap ??= { from: askedAt, samples: [] };
        this.gap.samples.push(`+${askedAt - this.gap.from} ${voters.map((v, i) => `${v.name || v.id}${health[i] ? '+' : '-'}`).join(' ')}`);
      } else {
        this.close(askedAt);
      }
    } finally {
      this.busy = false;
    }
  }

  private close(at: number): void {
    const gap = this.gap;
    if (gap === undefined) return;
    this.gap = undefined;
    if (at - gap.from <= this.longestGapMs && this.longestGap !== undefined) return;
    this.longestGapMs = at - gap.from;
    this.longestGap = {
      from: gap.from,
      to: at,
      samples: gap.samples,
      events: this.events.filter((e) => e.at >= gap.from - EVENT_LOOKBACK_MS && e.at <= at).map((e) => `${e.at - gap.from} ${e.what}`),
    };
  }
}
