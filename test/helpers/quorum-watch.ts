/**
 * The fault-injection test's quorum watch: every few hundred ms, the voters from the member list and
 * each voter's etcd `/health`; it records every stretch without a quorum of healthy voters, and each
 * member list it read.
 *
 * Invariant: silence is evidence only when it is a refusal. A voter that answers `/health` false, or
 * whose connection is refused or reset, is down; one that does not answer within the (long) health
 * deadline is unknown, never down, so a slow machine does not make a quorum look lost. A sample
 * decides "no quorum" only when more voters are down than a quorum can spare, "quorum" only when a
 * quorum answered true; anything between decides nothing.
 *
 * A stretch is measured between health observations, each stamped when its `/health` calls were
 * sent, never from when its sample began. A sample first reads the member list (a member frozen
 * after the endpoints were chosen holds it until it continues), so a sample's start can precede what
 * it observes by the whole freeze: stamping the start would count that wait as time without quorum.
 *
 * Each stretch keeps its story (what each sample in it saw, and the faults the test noted around
 * it), so a run that breaks a rule says what happened instead of only how long.
 */
import type { ListedMember } from './etcd-cluster';

/** What one voter's `/health` said: true, false or refused (down), or nothing within the deadline (unknown). */
export type VoterHealth = 'ok' | 'down' | 'unknown';

/** What the watch reads. */
export interface QuorumSource {
  /** The member list, asked of members whose own copy of it is current (etcd 3.4 answers from the asked member's copy). */
  list(): Promise<ListedMember[]>;
  /** What member `name`'s `/health` says within `timeoutMs`. */
  health(name: string, timeoutMs: number): Promise<VoterHealth>;
  /** Members that must be in every list (a list without one is a problem). */
  required(): ReadonlyArray<{ name: string; peerURL: string }>;
}

/** How often the watch samples, and how patient it is. */
export interface QuorumWatchOptions {
  intervalMs?: number;
  /** The member list is read again when the last one is older than this. */
  listEveryMs?: number;
  /** How long a voter's `/health` may take before it counts as unknown (not as down). */
  healthTimeoutMs?: number;
  /** The clock (tests pass their own). */
  now?: () => number;
}

/** A stretch without quorum, and what the watch saw of it. */
export interface GapStory {
  from: number;
  to: number;
  /** One line per sample inside the stretch: offset from its start, then each voter + (ok), - (down) or ? (unknown). */
  samples: string[];
  /** The faults the test noted from 2 s before the stretch to its end, with offsets from its start. */
  events: string[];
}

/** A member list the watch read, and when. */
export interface ListSample {
  at: number;
  members: ListedMember[];
}

const EVENT_LOOKBACK_MS = 2000;

/** Samples the cluster until stopped; see the module comment. */
export class QuorumWatch {
  samples = 0;
  /** Every stretch without quorum, in order (one still open is added by `stop`). */
  readonly stretches: GapStory[] = [];
  readonly lists: ListSample[] = [];
  readonly problems: string[] = [];
  private list: ListedMember[] = [];
  private lastListAt = Number.NEGATIVE_INFINITY;
  private gap?: { from: number; samples: string[] };
  private readonly events: Array<{ at: number; what: string }> = [];
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
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
    this.healthTimeoutMs = opts.healthTimeoutMs ?? 5000;
    this.now = opts.now ?? Date.now;
  }

  start(): void {
    this.timer = setInterval(() => void this.sample(), this.intervalMs);
  }

  /** Stops sampling once the sample in flight has ended; a stretch still open ends now. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
    this.close(this.now());
  }

  /** Records a fault the test injected (or undid), for the story of a stretch around it. */
  note(what: string): void {
    this.events.push({ at: this.now(), what });
  }

  /** The longest stretch without quorum (0 when none). */
  get longestGapMs(): number {
    return Math.max(0, ...this.stretches.map((s) => s.to - s.from));
  }

  /** A stretch as text: when, what each sample saw, which faults were around it. */
  describe(story: GapStory | undefined = [...this.stretches].sort((a, b) => b.to - b.from - (a.to - a.from))[0]): string {
    if (story === undefined) return 'no stretch without quorum';
    return [
      `stretch without quorum: ${story.to - story.from} ms from ${new Date(story.from).toISOString()}`,
      `  samples: ${story.samples.join(' | ')}`,
      `  faults: ${story.events.join(' | ') || 'none noted'}`,
    ].join('\n');
  }

  /** One sample (the timer calls it; tests may call it directly). Skipped while the previous one runs. */
  sample(): Promise<void> {
    if (this.running !== undefined) return this.running;
    this.running = this.take().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async take(): Promise<void> {
    if (this.now() - this.lastListAt > this.listEveryMs) {
      const list = await this.source.list().catch(() => undefined);
      if (list !== undefined && list.length > 0) {
        this.list = list;
        this.lastListAt = this.now();
        this.lists.push({ at: this.lastListAt, members: list });
        const missing = this.source.required().filter((r) => !list.some((m) => m.peerURLs.includes(r.peerURL)));
        if (missing.length > 0) {
          this.problems.push(`${new Date(this.lastListAt).toISOString()} member list lacks ${missing.map((m) => m.name).join(', ')}`);
        }
      }
    }
    const voters = this.list.filter((m) => !m.isLearner);
    const askedAt = this.now();
    const health = await Promise.all(
      voters.map((v): Promise<VoterHealth> =>
        v.name === '' ? Promise.resolve('down') : this.source.health(v.name, this.healthTimeoutMs).catch(() => 'unknown'),
      ),
    );
    this.samples += 1;
    if (voters.length === 0) return;
    const quorum = Math.floor(voters.length / 2) + 1;
    const ok = health.filter((h) => h === 'ok').length;
    const down = health.filter((h) => h === 'down').length;
    const seen = `${voters.map((v, i) => `${v.name || v.id}${{ ok: '+', down: '-', unknown: '?' }[health[i]]}`).join(' ')}`;
    if (down > voters.length - quorum) {
      this.gap ??= { from: askedAt, samples: [] };
      this.gap.samples.push(`+${askedAt - this.gap.from} ${seen}`);
    } else if (ok >= quorum) {
      this.close(askedAt);
    } else if (this.gap !== undefined) {
      // Neither: the stretch goes on, and its story says why it was not closed.
      this.gap.samples.push(`+${askedAt - this.gap.from} ${seen}`);
    }
  }

  private close(at: number): void {
    const gap = this.gap;
    if (gap === undefined) return;
    this.gap = undefined;
    this.stretches.push({
      from: gap.from,
      to: at,
      samples: gap.samples,
      events: this.events.filter((e) => e.at >= gap.from - EVENT_LOOKBACK_MS && e.at <= at).map((e) => `${e.at - gap.from} ${e.what}`),
    });
  }
}
