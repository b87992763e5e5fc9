/**
 * One shared, bounded-age observation (docs/api.md §4 GET /v1/health): any number of concurrent
 * callers cause at most one observation at a time (a few while refreshing ahead of a slow
 * one), and nobody is ever served a result whose observation started more than `maxAgeMs` ago.
 * A caller that cannot get a fresh result within `maxAgeMs` of asking gets `undefined`
 * ("unknown"), never the previous result.
 *
 * While it is being asked, the next observation starts ahead of the current one's expiry (as long
 * before it as the last observation took, plus a margin), so that a caller rarely waits for one:
 * with a silent member an observation takes the status timeout, and without refreshing ahead every
 * caller after expiry would wait that long. An observation that takes more than half the max age
 * leaves no time to start the next after it finishes, so they may then overlap (three at most, so an
 * observation that takes over about two thirds of the max age again makes some callers wait): the
 * load on etcd still depends on the max age, not on the request rate. Nobody asking, nothing runs.
 *
 * An answer built from results (`freshTogether`) judges them all fresh at one instant and measures
 * their ages from that same instant: a result judged fresh and then aged further while the caller
 * waited for another one, or while the event loop was busy, is never reported as fresh with an age
 * above the max age.
 */
import { within } from '../lib/deadline';

/** Time, beyond an observation's own duration, by which the next one starts ahead of expiry (covers the gap between callers). */
const REFRESH_MARGIN_MS = 150;
/** Most observations in flight at once (only while each takes more than half the max age). */
const MAX_FLIGHTS = 3;

/** A value and when its observation ran (`startedAt`/`finishedAt` on the monotonic clock). */
export interface Observed<T> {
  value: T;
  /** `performance.now()` when the observation started; its age is measured from here. */
  startedAt: number;
  finishedAt: number;
  /** Wall-clock time the observation started, as shown in answers. */
  observedAt: Date;
}

/** Shares observations made by `observe` among callers, serving none older than `maxAgeMs`. */
export class SharedObservation<T> {
  private latest?: Observed<T>;
  /** Observations in flight, oldest first: at most one, or three while refreshing ahead (see the module comment). */
  private readonly flights: Array<{ startedAt: number; done: Promise<Observed<T>> }> = [];

  constructor(
    private readonly maxAgeMs: number,
    private readonly observe: (startedAt: number) => Promise<T>,
  ) {}

  /** The newest finished observation, fresh or not (for the age gauge); undefined before the first. */
  get newest(): Observed<T> | undefined {
    return this.latest;
  }

  /**
   * A result no older than `maxAgeMs`: the newest finished observation if it started within the
   * max age, else the oldest one in flight that started within it, else a new one. Resolves
   * `undefined` when none is fresh by `arrival + maxAgeMs` (`arrival` on the `performance.now()` clock).
   * With `notBefore`, only an observation begun at or after it serves (evidence newer than some other).
   */
  async get(arrival = performance.now(), notBefore = -Infinity): Promise<Observed<T> | undefined> {
    const deadline = arrival + this.maxAgeMs;
    // Fresh, and begun no earlier than `notBefore` when the caller asks for newer evidence.
    const usable = (startedAt: number, now: number): boolean => now - startedAt <= this.maxAgeMs && startedAt >= notBefore;
    // Each round awaits an observation that started no earlier than the last one; three rounds
    // cover "joined one that then finished too late" without ever spinning.
    for (let round = 0; round < 3; round++) {
      const now = performance.now();
      if (this.latest !== undefined && usable(this.latest.startedAt, now)) {
        this.refreshIfDue(this.latest, now);
        return this.latest;
      }
      if (now >= deadline) return undefined;
      const joined = this.flights.find((f) => usable(f.startedAt, now))?.done ?? this.start();
      const done = await within(joined, deadline - now);
      if (done === undefined) return undefined;
      if (performance.now() - done.startedAt <= this.maxAgeMs) return done;
    }
    return undefined;
  }

  /**
   * Starts the next observation once the newest one started `period` ago, where `period` leaves
   * time for one more to finish (as long as the last took, plus a margin) before `latest` expires.
   * When an observation takes more than half the max age (a silent member's status timeout), the
   * next one starts while the previous is still in flight: never more than three at once.
   */
  private refreshIfDue(latest: Observed<T>, now: number): void {
    if (this.flights.length >= MAX_FLIGHTS) return;
    const took = latest.finishedAt - latest.startedAt;
    const period = this.maxAgeMs - took - (Math.min(REFRESH_MARGIN_MS, this.maxAgeMs / 5) + took / 10);
    const newestStart = Math.max(latest.startedAt, ...this.flights.map((f) => f.startedAt));
    // Its failure reaches whoever joins it; nobody waits on it here.
    if (now - newestStart >= period) this.start().catch(() => undefined);
  }

  /** Whether `observed` is still within the max age at `now` (`performance.now()`). */
  isFresh(observed: Observed<T>, now: number): boolean {
    return now - observed.startedAt <= this.maxAgeMs;
  }

  private start(): Promise<Observed<T>> {
    const startedAt = performance.now();
    const observedAt = new Date();
    const done: Promise<Observed<T>> = Promise.resolve()
      .then(() => this.observe(startedAt))
      .then((value) => {
        const observed = { value, startedAt, finishedAt: performance.now(), observedAt };
        if (this.latest === undefined || this.latest.startedAt <= startedAt) this.latest = observed;
        return observed;
      })
      .finally(() => {
        const at = this.flights.findIndex((f) => f.done === done);
        if (at >= 0) this.flights.splice(at, 1);
      });
    this.flights.push({ startedAt, done });
    return done;
  }
}

/** One result per view, in the views' order. */
type Results<V> = { [K in keyof V]: V[K] extends SharedObservation<infer T> ? Observed<T> | undefined : never };

/**
 * A fresh result from each view (`get`), all judged at one instant `at` (`performance.now()`) from
 * which the caller measures their ages. A result that has aged past its max age by then (it was
 * awaited beside a slower one, or the event loop was busy) is asked for again; after three rounds it
 * counts as not found. So no answer reports, or is built from, evidence older than the max age.
 */
export async function freshTogether<V extends ReadonlyArray<SharedObservation<unknown>>>(
  views: readonly [...V],
  arrival: number,
  notBefore?: number,
): Promise<{ found: Results<V>; at: number }> {
  for (let round = 1; ; round++) {
    const found = await Promise.all(views.map((view) => view.get(arrival, notBefore)));
    const at = performance.now();
    const fresh = found.map((observed, i) => (observed !== undefined && views[i].isFresh(observed, at) ? observed : undefined));
    if (round === 3 || fresh.every((observed, i) => observed === found[i])) return { found: fresh as Results<V>, at };
  }
}
