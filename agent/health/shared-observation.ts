/**
 * One shared, bounded-age observation (CONTRACT §4 GET /v1/health): any number of concurrent
 * callers cause at most one observation at a time, and nobody is ever served a result whose
 * observation started more than `maxAgeMs` ago. A caller that cannot get a fresh result within
 * `maxAgeMs` of asking gets `undefined` ("unknown"), never the previous result.
 *
 * While it is being asked, the next observation starts ahead of the current one's expiry (as long
 * before it as the last observation took, plus a margin), so that a caller rarely waits for one:
 * with a silent member an observation takes the status timeout, and without refreshing ahead every
 * caller after expiry would wait that long. Nobody asking, nothing runs.
 */

/** Time, beyond an observation's own duration, by which the next one starts ahead of expiry. */
const REFRESH_MARGIN_MS = 100;

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
  private inflight?: Promise<Observed<T>>;

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
   * max age, else the one in flight, else a new one. Resolves `undefined` when none is fresh by
   * `arrival + maxAgeMs` (`arrival` on the `performance.now()` clock).
   */
  async get(arrival = performance.now()): Promise<Observed<T> | undefined> {
    const deadline = arrival + this.maxAgeMs;
    // Each round awaits an observation that started no earlier than the last one; three rounds
    // cover "joined one that then finished too late" without ever spinning.
    for (let round = 0; round < 3; round++) {
      const now = performance.now();
      if (this.latest !== undefined && now - this.latest.startedAt <= this.maxAgeMs) {
        this.refreshIfDue(this.latest, now);
        return this.latest;
      }
      if (now >= deadline) return undefined;
      const done = await within(this.inflight ?? this.start(), deadline - now);
      if (done === undefined) return undefined;
      if (performance.now() - done.startedAt <= this.maxAgeMs) return done;
    }
    return undefined;
  }

  /** Starts the next observation when `latest` expires within about the time one takes (see the module comment). */
  private refreshIfDue(latest: Observed<T>, now: number): void {
    if (this.inflight !== undefined) return;
    const took = latest.finishedAt - latest.startedAt;
    const due = latest.startedAt + this.maxAgeMs - took - (REFRESH_MARGIN_MS + took / 4);
    // Its failure reaches whoever joins it; nobody waits on it here.
    if (now >= due) this.start().catch(() => undefined);
  }

  private start(): Promise<Observed<T>> {
    const startedAt = performance.now();
    const observedAt = new Date();
    const flight: Promise<Observed<T>> = Promise.resolve()
      .then(() => this.observe(startedAt))
      .then((value) => {
        const observed = { value, startedAt, finishedAt: performance.now(), observedAt };
        if (this.latest === undefined || this.latest.startedAt <= startedAt) this.latest = observed;
        return observed;
      })
      .finally(() => {
        if (this.inflight === flight) this.inflight = undefined;
      });
    this.inflight = flight;
    return flight;
  }
}

/** `promise`'s value, or undefined once `ms` have passed first; the timer never outlives the wait. */
export function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(undefined), Math.max(0, ms));
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
