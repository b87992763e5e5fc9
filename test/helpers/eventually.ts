/**
 * The tests' one patience: `eventually(check, { within, every })` asks `check` again until it
 * answers, for at most `within` ms times TEST_TIME_SCALE.
 *
 * TEST_TIME_SCALE (environment, default 1): a positive number that multiplies every patience the
 * tests wait with, so a slower machine changes this one number (for example TEST_TIME_SCALE=2),
 * not the bounds written in each test. It lengthens waits for an event only: the pause between
 * tries, and any deadline the agent promises and a test asserts, stay as written. A wait loop that
 * cannot be an `eventually` (it also watches a process exit, or answers the last reply it got)
 * scales its bound with `patience(ms)`.
 */

/** How `eventually` waits: its patience before the scale (`within`, ms) and the pause between tries (`every`, ms, default 200). */
export interface Patience {
  within: number;
  every?: number;
}

/** TEST_TIME_SCALE of `env`: 1 when unset or empty; anything but a positive decimal number is refused. */
export function timeScale(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.TEST_TIME_SCALE;
  if (raw === undefined || raw.trim() === '') return 1;
  const scale = /^\s*(\d+(\.\d*)?|\.\d+)\s*$/.test(raw) ? Number(raw) : NaN;
  if (!(scale > 0) || !Number.isFinite(scale)) {
    throw new Error(
      `TEST_TIME_SCALE must be a positive number (how many times longer the tests may wait for an event; default 1), not ${JSON.stringify(raw)}`,
    );
  }
  return scale;
}

/** `ms` of patience as this machine's TEST_TIME_SCALE lengthens it. */
export function patience(ms: number, env: NodeJS.ProcessEnv = process.env): number {
  return ms * timeScale(env);
}

/**
 * Calls `check` until a try answers something other than `false` without throwing, and answers that.
 * A try that throws or answers `false` is "not yet"; when the next try would start past the patience,
 * it rejects with the last try's error (so an `expect` inside `check` reports its own difference),
 * or, when the last try answered `false`, with an error saying so. The first try is always made.
 */
export async function eventually<T>(check: () => T | false | Promise<T | false>, { within, every = 200 }: Patience): Promise<T> {
  const waitMs = patience(within);
  const deadline = Date.now() + waitMs;
  for (let tries = 1; ; tries++) {
    let last: { error: unknown } | undefined;
    try {
      const answer = await check();
      if (answer !== false) return answer;
    } catch (error) {
      last = { error };
    }
    if (Date.now() + every > deadline) {
      if (last !== undefined) throw last.error;
      throw new Error(`the check still answered false after ${tries} tries within ${waitMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, every));
  }
}
