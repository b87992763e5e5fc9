/**
 * What the defragmentation test (test/integration/maintenance-defrag.test.ts) and the bench's
 * `defrag` section watch while members are defragmented, from outside the agent:
 * - `WriteLoad`: one writer per member, each putting through that member's own JSON gateway
 *   (`POST /v3/kv/put`, etcd 3.4–3.7) one key after the other; the longest time between two
 *   answered puts is a write gap. A write stalls while the member it goes through is defragmented
 *   (that member applies nothing meanwhile); writes through the others go on, even while the leader
 *   is defragmented in place (measured on 3.4 and 3.6: its raft loop still commits);
 * - `KeepAliveLoad`: the same with lease keep-alives. etcd renews a lease on the leader only once the
 *   leader has applied everything committed, so while the leader is defragmented in place every
 *   keep-alive of the cluster stalls, through any member (1.4–1.5 s of a 1.3–1.5 s defragmentation on
 *   3.4 and 3.6): what moving leadership away first spares;
 * - `StatusWatch`: each member's Status (`POST /v3/maintenance/status`) sent every few ms, each
 *   call not waiting for the ones before, with a long deadline, and when each was sent and
 *   answered; a member defragmenting answers no Status until it is done (measured on 3.4–3.7);
 * - `defragIntervals`: when each member itself says it defragmented, from its own log lines
 *   ("starting defragment" → "finished defragment", the harness runs etcd with the zap logger):
 *   the exact answer to "were two members defragmenting at once?"; `lockedIntervals`: the part of
 *   each in which its backend held its locks ("defragmenting" → "finished defragmenting directory",
 *   "defragmented" on 3.4), inside which it can serve no Status.
 * Times are epoch milliseconds (Date.now()), the clock etcd's log lines use.
 */
import fs from 'node:fs';
import { noop } from 'cockatiel';
import { Etcd3 } from 'etcd3';
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
export function overlapsBetween(
  byMember: ReadonlyMap<string, readonly Interval[]>,
): Array<{ a: string; b: string; a1: Interval; b1: Interval }> {
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

/**
 * The stretches of a member's etcd log (zap JSON lines about defragmentation) from a line whose
 * message is `opens` to the next whose message is one of `closes`, in order; an unfinished one ends
 * at `now`.
 */
function logIntervals(logFile: string, opens: string, closes: readonly string[], now: number): Interval[] {
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
    if (entry.msg === opens) start = at;
    if (closes.includes(entry.msg ?? '') && start !== undefined) {
      intervals.push({ from: start, to: at });
      start = undefined;
    }
  }
  if (start !== undefined) intervals.push({ from: start, to: now });
  return intervals;
}

/** The defragmentations a member's etcd log records, in order; an unfinished one ends at `now`. */
export function defragIntervals(logFile: string, now = Date.now()): Interval[] {
  return logIntervals(logFile, 'starting defragment', ['finished defragment', 'failed to defragment'], now);
}

/**
 * The stretches in which a member's backend held its locks to defragment, from its log: from
 * "defragmenting" (logged once it has them) to "finished defragmenting directory" ("defragmented" on
 * 3.4), both logged before it lets them go; an unfinished one ends at `now`.
 */
export function lockedIntervals(logFile: string, now = Date.now()): Interval[] {
  return logIntervals(logFile, 'defragmenting', ['finished defragmenting directory', 'defragmented', 'failed to defragment'], now);
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
          if (answer.status !== 200)
            throw new Error(`txn at key ${from}: HTTP ${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`);
        }
      }),
    );
  } finally {
    for (const client of clients) client.close();
  }
}

/**
 * The longest stretch between two answers (or between `start`/`stop` and one) that falls inside
 * `window`, counting only the part inside it.
 */
function longestGapIn(times: readonly number[], start: number, stop: number, window: Interval): number {
  const points = [start, ...[...times].sort((a, b) => a - b), stop];
  let longest = 0;
  for (let i = 1; i < points.length; i++) {
    const inside = Math.min(points[i], window.to) - Math.max(points[i - 1], window.from);
    longest = Math.max(longest, inside);
  }
  return longest;
}

/** Calls answered through each member, and the gaps between them. */
abstract class MemberLoad {
  /** Answered calls, by member name: [sent, answered] epoch ms. */
  readonly answered = new Map<string, Array<[number, number]>>();
  readonly failures = new Map<string, number>();
  protected running = true;
  protected readonly loops: Array<Promise<void>> = [];
  readonly startedAt = Date.now();
  stoppedAt?: number;

  protected record(name: string, sent: number): void {
    this.answered.get(name)?.push([sent, Date.now()]);
  }

  protected fail(name: string): void {
    this.failures.set(name, (this.failures.get(name) ?? 0) + 1);
  }

  /** Stops the loops once their calls in flight are answered. */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    this.stoppedAt = Date.now();
  }

  private get whole(): Interval {
    return { from: this.startedAt, to: this.stoppedAt ?? Date.now() };
  }

  /** The longest stretch inside `window` (the whole run by default) without an answer through `member`. */
  longestGap(member: string, window: Interval = this.whole): number {
    return longestGapIn(
      (this.answered.get(member) ?? []).map(([, at]) => at),
      this.whole.from,
      this.whole.to,
      window,
    );
  }

  /** The longest stretch inside `window` without an answer through any member: the cluster as a whole served none. */
  longestClusterGap(window: Interval = this.whole): number {
    return longestGapIn(
      [...this.answered.values()].flatMap((l) => l.map(([, at]) => at)),
      this.whole.from,
      this.whole.to,
      window,
    );
  }

  /** Calls answered through `member` within `window`. */
  countIn(member: string, window: Interval): number {
    return (this.answered.get(member) ?? []).filter(([, at]) => at >= window.from && at <= window.to).length;
  }
}

/** One lease per member, kept alive through that member one keep-alive after the other (etcd3 client, no retries). */
export class KeepAliveLoad extends MemberLoad {
  constructor(members: ReadonlyArray<{ name: string; clientURL: string }>) {
    super();
    for (const m of members) {
      this.answered.set(m.name, []);
      this.failures.set(m.name, 0);
      this.loops.push(this.loop(m.name, m.clientURL));
    }
  }

  private async loop(name: string, url: string): Promise<void> {
    const client = new Etcd3({ hosts: [url], faultHandling: { global: noop, host: () => noop } });
    try {
      const { ID } = await client.leaseClient.leaseGrant({ TTL: 60 }, { deadline: new Date(Date.now() + 10_000) });
      while (this.running) {
        const sent = Date.now();
        try {
          const stream = await client.leaseClient.leaseKeepAlive();
          await new Promise<void>((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error('no keep-alive answer within 20 s')), 20_000);
            stream.on('data', () => {
              clearTimeout(timer);
              resolve();
            });
            stream.on('error', (err: Error) => {
              clearTimeout(timer);
              reject(err);
            });
            stream.write({ ID });
          });
          stream.end();
          this.record(name, sent);
        } catch {
          this.fail(name);
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } catch {
      this.fail(name);
    } finally {
      client.close();
    }
  }
}

/** One writer per member: puts one after the other through that member, and when each was answered. */
export class WriteLoad extends MemberLoad {
  constructor(
    members: ReadonlyArray<{ name: string; clientURL: string }>,
    private readonly putTimeoutMs = 20_000,
  ) {
    super();
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
        if (answer.status === 200) this.record(name, sent);
        else throw new Error(`HTTP ${answer.status}`);
      } catch {
        this.fail(name);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    client.close();
  }
}

/** One Status call of the watch: when it was sent and answered (epoch ms), and whether it was served (HTTP 200). */
export interface StatusCall {
  sentAt: number;
  at: number;
  served: boolean;
}

/**
 * Each member's Status, one call every `everyMs` whatever the calls before are doing, each with a
 * deadline long enough to outlast any defragmentation: when each was sent and answered. A call held
 * by a member is answered when the member lets it go, so the record says when each member served.
 */
export class StatusWatch {
  /** Every call answered (or failed), by member name. */
  readonly calls = new Map<string, StatusCall[]>();
  private running = true;
  private readonly loops: Array<Promise<void>> = [];

  constructor(
    members: ReadonlyArray<{ name: string; clientURL: string }>,
    private readonly everyMs = 20,
    private readonly deadlineMs = 60_000,
  ) {
    for (const m of members) {
      this.calls.set(m.name, []);
      this.loops.push(this.loop(m.name, m.clientURL));
    }
  }

  private async loop(name: string, url: string): Promise<void> {
    const client = new HttpClient(url, 64);
    const inFlight = new Set<Promise<void>>();
    while (this.running) {
      const sentAt = Date.now();
      const call: Promise<void> = client
        .post('/v3/maintenance/status', {}, this.deadlineMs)
        .then(
          (answer) => answer.status === 200,
          () => false,
        )
        .then((served) => {
          this.calls.get(name)?.push({ sentAt, at: Date.now(), served });
          inFlight.delete(call);
        });
      inFlight.add(call);
      await new Promise((resolve) => setTimeout(resolve, this.everyMs));
    }
    await Promise.all(inFlight);
    client.close();
  }

  /** Stops sending; resolves once the calls in flight are answered. */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }
}
