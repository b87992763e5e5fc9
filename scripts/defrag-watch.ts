/**
 * What the defragmentation test (test/integration/maintenance-defrag.test.ts) and the bench's
 * `defrag` section watch while members are defragmented, from outside the agent:
 * - `WriteLoad`: one writer per member, each putting through that member's own JSON gateway
 *   (`POST /v3/kv/put`, etcd 3.4–3.7) one key after the other; the longest time between two
 *   answered puts is a write gap (a write stalls while the member it goes through is defragmented,
 *   and every write stalls while the leader is);
 * - `StatusWatch`: each member's Status (`POST /v3/maintenance/status`) every few ms; a member
 *   defragmenting answers no Status until it is done (measured on 3.4–3.7), so a stretch of
 *   unanswered (or late) calls is the member out of service;
 * - `defragIntervals`: when each member itself says it defragmented, from its own log lines
 *   ("starting defragment" → "finished defragment", the harness runs etcd with the zap logger):
 *   the exact answer to "were two members defragmenting at once?".
 * Times are epoch milliseconds (Date.now()), the clock etcd's log lines use.
 */
import fs from 'node:fs';
import { HttpClient } from './bench/http';

/** A stretch of time, epoch ms. */
export interface Interval {
  from: number;
  to: number;
}

/** True when `a` and `b` share a moment. */
export function overlaps(a: Interval, b: Interval): boolean {
  return a.from < b.to && b.from < a.to;
}

/** Pairs of intervals of different members that overlap: every one is two members out of service at once. */
export function overlapsBetween(byMember: ReadonlyMap<string, readonly Interval[]>): Array<{ a: string; b: string; a1: Interval; b1: Interval }> {
  const names = [...byMember.keys()];
  const found: Array<{ a: string; b: string; a1: Interval; b1: Interval }> = [];
  for (let i = 0; i < names.length; i++) {
    for (let j = i + 1; j < names.length; j++) {
      for (const a1 of byMember.get(names[i]) ?? []) {
        for (const b1 of byMember.get(names[j]) ?? []) if (overlaps(a1, b1)) found.push({ a: names[i], b: names[j], a1, b1 });
      }
    }
  }
  return found;
}

/** The defragmentations a member's etcd log records (zap JSON lines), in order; an unfinished one ends at `now`. */
export function defragIntervals(logFile: string, now = Date.now()): Interval[] {
  const intervals: Interval[] = [];
  let start: number | undefined;
  for (const line of fs.readFileSync(logFile, 'utf8').split('\n')) {
    if (!line.includes('defragment')) continue;
    let entry: { msg?: string; ts?: string | number };
    try {
      entry = JSON.parse(line) as { msg?: string; ts?: string | number };
    } catch {
      continue;
    }
    const at = typeof entry.ts === 'number' ? entry.ts * 1000 : Date.parse(String(entry.ts));
    if (entry.msg === 'starting defragment') start = at;
    if ((entry.msg === 'finished defragment' || entry.msg === 'failed to defragment') && start !== undefined) {
      intervals.push({ from: start, to: at });
      start = undefined;
    }
  }
  if (start !== undefined) intervals.push({ from: start, to: now });
  return intervals;
}

/**
 * Writes `keys` keys of `bytes` bytes each through `clientURL`'s gateway, `passes` times over (each
 * pass overwrites the last, so all but the last pass is history a compaction frees), in transactions
 * of 100 puts, four at a time. Many small keys make a defragmentation take time: etcd copies the
 * database key by key (20,000 keys of 1 kB took 0.3–1 s on this project's machine; 20 values of
 * 600 kB, 50 ms).
 */
export async function writeKeys(clientURL: string, opts: { keys: number; bytes: number; passes: number; prefix?: string }): Promise<void> {
  const value = Buffer.alloc(opts.bytes, 'v').toString('base64');
  const clients = Array.from({ length: 4 }, () => new HttpClient(clientURL));
  const batches: number[] = [];
  for (let pass = 0; pass < opts.passes; pass++) for (let from = 0; from < opts.keys; from += 100) batches.push(from);
  try {
    await Promise.all(
      clients.map(async (client) => {
        for (let from = batches.shift(); from !== undefined; from = batches.shift()) {
          const success = [];
          for (let k = from; k < Math.min(from + 100, opts.keys); k++) {
            success.push({ request_put: { key: Buffer.from(`${opts.prefix ?? 'load'}/${k}`).toString('base64'), value } });
          }
          const answer = await client.post('/v3/kv/txn', { success }, 30_000);
          if (answer.status !== 200) throw new Error(`txn at key ${from}: HTTP ${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`);
        }
      }),
    );
  } finally {
    for (const client of clients) client.close();
  }
}

/** One writer per member: puts one after the other through that member, and when each was answered. */
export class WriteLoad {
  /** Answered puts, by member name: [sent, answered] epoch ms. */
  readonly answered = new Map<string, Array<[number, number]>>();
  readonly failures = new Map<string, number>();
  private running = true;
  private readonly loops: Array<Promise<void>> = [];
  readonly startedAt = Date.now();
  stoppedAt?: number;

  constructor(members: ReadonlyArray<{ name: string; clientURL: string }>, private readonly putTimeoutMs = 20_000) {
    for (const m of members) {
      this.answered.set(m.name, []);
      this.failures.set(m.name, 0);
      this.loops.push(this.loop(m.name, new HttpClient(m.clientURL)));
    }
  }

  private async loop(name: string, client: HttpClient): Promise<void> {
    const key = Buffer.from(`writer/${name}`).toString('base64');
    for (let i = 0; this.running; i++) {
      const sent = Date.now();
      try {
        const answer = await client.post('/v3/kv/put', { key, value: Buffer.from(String(i)).toString('base64') }, this.putTimeoutMs);
        if (answer.status === 200) this.answered.get(name)?.push([sent, Date.now()]);
        else throw new Error(`HTTP ${answer.status}`);
      } catch {
        this.failures.set(name, (this.failures.get(name) ?? 0) + 1);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    client.close();
  }

  /** Stops the writers once their puts in flight are answered. */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    this.stoppedAt = Date.now();
  }

  /**
   * The longest stretch without an answered put through `member` that overlaps `window` (the whole
   * run by default): from one answer to the next, or from the window's edge.
   */
  longestGap(member: string, window: Interval = { from: this.startedAt, to: this.stoppedAt ?? Date.now() }): number {
    const times = (this.answered.get(member) ?? []).map(([, at]) => at);
    const points = [this.startedAt, ...times, this.stoppedAt ?? Date.now()];
    let longest = 0;
    for (let i = 1; i < points.length; i++) {
      const gap = { from: points[i - 1], to: points[i] };
      if (overlaps(gap, window)) longest = Math.max(longest, gap.to - gap.from);
    }
    return longest;
  }

  /**
   * The longest stretch overlapping `window` in which no put was answered through any member: the
   * cluster as a whole took no write (what a defragmentation of the leader in place does).
   */
  longestClusterGap(window: Interval = { from: this.startedAt, to: this.stoppedAt ?? Date.now() }): number {
    const times = [...this.answered.values()].flatMap((l) => l.map(([, at]) => at)).sort((a, b) => a - b);
    const points = [this.startedAt, ...times, this.stoppedAt ?? Date.now()];
    let longest = 0;
    for (let i = 1; i < points.length; i++) {
      const gap = { from: points[i - 1], to: points[i] };
      if (overlaps(gap, window)) longest = Math.max(longest, gap.to - gap.from);
    }
    return longest;
  }

  /** Puts answered through `member` within `window`. */
  countIn(member: string, window: Interval): number {
    return (this.answered.get(member) ?? []).filter(([, at]) => at >= window.from && at <= window.to).length;
  }
}

/** Each member's Status, again and again; stretches it did not answer within `slowMs` are out of service. */
export class StatusWatch {
  /** Stretches each member answered no Status (from the call that went unanswered to the next answer). */
  readonly silent = new Map<string, Interval[]>();
  /** Stretches this process itself stalled (a timer late by more than `slowMs`): every call then looks late. */
  readonly stalls: Interval[] = [];
  private running = true;
  private readonly loops: Array<Promise<void>> = [];
  private readonly lag: NodeJS.Timeout;

  constructor(
    members: ReadonlyArray<{ name: string; clientURL: string }>,
    private readonly slowMs = 250,
    private readonly everyMs = 20,
  ) {
    for (const m of members) {
      this.silent.set(m.name, []);
      this.loops.push(this.loop(m.name, m.clientURL));
    }
    let last = Date.now();
    this.lag = setInterval(() => {
      const now = Date.now();
      if (now - last > 10 + slowMs / 2) this.stalls.push({ from: last, to: now });
      last = now;
    }, 10);
  }

  private async loop(name: string, url: string): Promise<void> {
    let client = new HttpClient(url);
    let outSince: number | undefined;
    while (this.running) {
      const sent = Date.now();
      let ok = false;
      try {
        ok = (await client.post('/v3/maintenance/status', {}, this.slowMs)).status === 200;
      } catch {
        ok = false;
      }
      if (!ok) outSince ??= sent;
      else if (outSince !== undefined) {
        this.silent.get(name)?.push({ from: outSince, to: Date.now() });
        outSince = undefined;
      }
      if (!ok) {
        // A timed-out call leaves a dead keep-alive socket behind: the next one opens a fresh one.
        client.close();
        client = new HttpClient(url);
      }
      await new Promise((resolve) => setTimeout(resolve, this.everyMs));
    }
    if (outSince !== undefined) this.silent.get(name)?.push({ from: outSince, to: Date.now() });
    client.close();
  }

  /**
   * The silent stretches this process did not cause itself: a stretch within a stall of this process
   * (its event loop late, so every call looked late) is left out. What remains is members out of service.
   */
  outOfService(): Map<string, Interval[]> {
    // Stalls less than a call's patience apart are one stall to a call made across them.
    const merged: Interval[] = [];
    for (const s of this.stalls) {
      const last = merged.at(-1);
      if (last !== undefined && s.from - last.to < this.slowMs) last.to = Math.max(last.to, s.to);
      else merged.push({ ...s });
    }
    const explained = (i: Interval): boolean => merged.some((s) => s.from - this.slowMs <= i.from && i.to <= s.to + this.slowMs);
    return new Map([...this.silent].map(([name, list]) => [name, list.filter((i) => !explained(i))]));
  }

  /** Stops watching. */
  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.lag);
    await Promise.all(this.loops);
  }
}
