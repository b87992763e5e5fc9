/**
 * The agent's one way to wait for something to become true: ask, pause, ask
 * again, and stop before a pause would run past a point in time. Every wait of
 * the agent (the membership lock, a new leader taking over, a join with
 * `wait: true`) goes through `pollUntil`, so none of them can outlive its call.
 */
import { delay } from './deadline';

/** How a poll is paced and bounded. */
export interface PollOptions {
  /** Epoch milliseconds: no pause ends after this point; the poll gives up instead. */
  until: number;
  /** The pause after round `round` (1-based): fixed, or a backoff computed by the caller. */
  pauseMs: number | ((round: number) => number);
}

/**
 * Runs `ask` until it returns a value other than `undefined` and returns that value; pauses between
 * rounds as `options.pauseMs` says; returns `undefined` when the next pause would end after
 * `options.until`. `ask` always runs at least once; a rejection of `ask` ends the poll with it.
 */
export async function pollUntil<T>(options: PollOptions, ask: (round: number) => Promise<T | undefined>): Promise<T | undefined> {
  for (let round = 1; ; round++) {
    const answer = await ask(round);
    if (answer !== undefined) return answer;
    const pause = typeof options.pauseMs === 'number' ? options.pauseMs : options.pauseMs(round);
    if (Date.now() + pause > options.until) return undefined;
    await delay(pause);
  }
}
