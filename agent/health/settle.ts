/**
 * A call of a health observation that settles by its time, whatever the call does.
 *
 * Invariant: `settle` never rejects, and settles at most SETTLE_GRACE_MS after the time it gave the call has
 * run out, counted from the call's start: etcd3's own deadlines normally end a call first, but an
 * observation must not depend on that (or on etcd3's retries).
 */
import { failureLine, ranOutOfTime } from '../etcd/errors';
import { NOT_ASKED } from './reask';

/** How long past its own time a call is given to settle by itself (its etcd3 deadline) before `settle` answers for it. */
const SETTLE_GRACE_MS = 20;

/**
 * A settled call: its value, or its failure in one line (etcd/errors.ts `failureLine`); `outOfTime`
 * when it failed only because its time ran out (or none was left to send it), with no refusal.
 */
export type Settled<T> = { ok: true; value: T } | { ok: false; error: string; outOfTime?: true };

/** Runs `call` with `ms` to spend and settles by then; with no time left it is not sent (`NOT_ASKED`). */
export function settle<T>(call: (ms: number) => Promise<T>, ms: number): Promise<Settled<T>> {
  if (ms <= 0) return Promise.resolve({ ok: false, error: NOT_ASKED, outOfTime: true });
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const done = (result: Settled<T>): void => {
      clearTimeout(timer);
      resolve(result);
    };
    Promise.resolve()
      .then(() => {
        const answer = call(ms);
        // Timed from here: the call's synchronous start (the first one loads etcd3 and gRPC, which
        // blocks for a while on a cold start) happens before its own deadline is set, too.
        timer = setTimeout(() => resolve({ ok: false, error: `no answer within ${ms} ms`, outOfTime: true }), ms + SETTLE_GRACE_MS);
        return answer;
      })
      .then(
        (value) => done({ ok: true, value }),
        (err: unknown) => done({ ok: false, error: failureLine(err, ms), ...(ranOutOfTime(err) ? { outOfTime: true as const } : {}) }),
      );
  });
}
