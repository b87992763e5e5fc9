/**
 * A call's deadline (docs/api.md §4 `timeoutSeconds`), passed down to every etcd
 * call so that no step outlives the request that asked for it.
 */
import { AgentError } from '../proto/errors';

/** An absolute point in time by which a call must answer. */
export class Deadline {
  private constructor(private end: number) {}

  /** A deadline `ms` from now. */
  static in(ms: number): Deadline {
    return new Deadline(Date.now() + ms);
  }

  /** Epoch milliseconds by which the call must answer (now, once `cut`). */
  get at(): number {
    return this.end;
  }

  /**
   * A deadline of its own at the same point in time, which `cut` may bring forward without touching
   * this one: for a step the call gives up on while the call itself goes on (membership/quorum-gate.ts).
   */
  child(): Deadline {
    return new Deadline(this.end);
  }

  /**
   * Makes this deadline pass now: the etcd calls bounded by it stop retrying, and an attempt in flight
   * ends at its own (already capped) deadline at the latest.
   */
  cut(): void {
    this.end = Math.min(this.end, Date.now());
  }

  /** Milliseconds left (0 once passed). */
  remainingMs(): number {
    return Math.max(0, this.at - Date.now());
  }

  /** True once the deadline has passed. */
  expired(): boolean {
    return Date.now() >= this.at;
  }

  /**
   * A timeout for one call inside this deadline: the earlier of `ms` and what is left, and at least
   * 1 ms, as a timeout of 0 would mean "none" to some clients; a call made with nothing left fails
   * at once.
   */
  budget(ms: number): number {
    return Math.min(ms, Math.max(1, this.remainingMs()));
  }

  /** The earlier of this deadline and `ms` from now, as a Date for gRPC call options. */
  capped(ms: number): Date {
    return new Date(Math.min(this.at, Date.now() + ms));
  }

  /** Throws a `timeout` AgentError naming the step reached, once the deadline has passed. */
  check(step: string): void {
    if (this.expired()) throw timeoutError(step);
  }

  /** Resolves after `ms`, or rejects with `timeout` when the deadline comes first. */
  async sleep(ms: number, step: string): Promise<void> {
    if (this.remainingMs() < ms) {
      await delay(this.remainingMs());
      throw timeoutError(step);
    }
    await delay(ms);
  }
}

/** The contract's `timeout` error, with the step reached in `details`. */
export function timeoutError(step: string): AgentError {
  return new AgentError('timeout', `the deadline passed while ${step}`, { details: { step } });
}

/** Resolves after `ms` milliseconds. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * `promise`'s value, or undefined once `ms` have passed first. The timer never outlives the wait and
 * holds nothing open: a stop that waits briefly for a pass in flight never keeps the process alive.
 */
export function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(undefined), Math.max(0, ms));
    timer.unref();
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

/** Waits until `work` settles (fulfilled or rejected: its outcome is its owner's to read) or `ms` have passed, whichever is first. */
export async function settledWithin(work: Promise<unknown>, ms: number): Promise<void> {
  await within(
    work.then(
      () => undefined,
      () => undefined,
    ),
    ms,
  );
}
