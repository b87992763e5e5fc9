import { settledWithin } from '../../agent/lib/deadline';

describe('settledWithin', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it.each<[string, (resolve: () => void, reject: (e: Error) => void) => void, number]>([
    ['the work ends first', (resolve) => setTimeout(resolve, 20), 20],
    [
      "the work fails first (its error is its owner's, not the waiter's)",
      (_resolve, reject) => setTimeout(() => reject(new Error('failed')), 20),
      20,
    ],
    ['the work outlasts the wait', () => undefined, 100],
  ])('when %s, then it returns at that moment, and no timer of its own is left', async (_case, work, endsAt) => {
    const start = Date.now();
    const p = new Promise<void>(work);
    p.catch(() => undefined);
    let returnedAt: number | undefined;

    const waiting = settledWithin(p, 100).then(() => (returnedAt = Date.now() - start));
    await jest.advanceTimersByTimeAsync(endsAt - 1);
    expect(returnedAt).toBeUndefined();
    await jest.advanceTimersByTimeAsync(1);
    await waiting;

    expect(returnedAt).toBe(endsAt);
    expect(jest.getTimerCount()).toBe(0);
  });
});
