/**
 * A timer that fires at each time a cron schedule names (UTC) and waits for each firing to end before
 * arming the next, so two firings of one schedule never overlap. Node's timers wait at most 2^31 − 1 ms,
 * so a later time is reached in several waits. Unref'd: a schedule never keeps the process alive.
 */
import { nextAfter, type CronSchedule } from './cron';

/** The longest a single timer waits (Node's limit is 2^31 − 1 ms); a later time is reached in several waits. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** A timer that fires within this of its time has reached it (a timer and the wall clock drift by milliseconds); one firing earlier ends a part of a split wait. */
const EARLY_FIRE_MS = 1000;

/** Fires `fire(at)` at each time of `schedule`; `start` once, `stop` on shutdown. */
export class CronTimer {
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private running?: Promise<void>;

  constructor(
    private readonly schedule: CronSchedule,
    private readonly fire: (at: Date) => Promise<void>,
    private readonly now: () => number = Date.now,
  ) {}

  /** The next time the schedule names, after now. */
  next(): Date | undefined {
    return nextAfter(this.schedule, new Date(this.now()));
  }

  /** The schedule's period around now: the time from its next firing to the one after (absent for a schedule that ends). */
  periodSeconds(): number | undefined {
    const first = this.next();
    const second = first === undefined ? undefined : nextAfter(this.schedule, first);
    return first === undefined || second === undefined ? undefined : (second.getTime() - first.getTime()) / 1000;
  }

  /** Starts waiting for the first time. */
  start(): void {
    this.arm();
  }

  /**
   * Disarms the timer at once (before its first await) and resolves once a firing in flight has
   * ended. The firing's own work is its owner's to stop: stop it after calling this, then await this
   * (agent.ts), or the wait lasts as long as that work.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }

  private arm(): void {
    if (this.stopped) return;
    const next = this.next();
    if (next === undefined) return;
    const wait = Math.min(MAX_TIMER_MS, Math.max(0, next.getTime() - this.now()));
    this.timer = setTimeout(() => {
      if (this.now() < next.getTime() - EARLY_FIRE_MS) return this.arm(); // a long wait, split in parts
      this.running = this.fire(next)
        .catch(() => undefined)
        .finally(() => {
          this.running = undefined;
          this.arm();
        });
    }, wait);
    this.timer.unref();
  }
}
