import { pollUntil } from '../../agent/lib/poll';

/** Runs `poll` under fake timers, recording when (ms after the start) each round asked. */
async function rounds<T>(poll: (ask: (round: number) => Promise<T | undefined>) => Promise<T | undefined>, answerAt: number | undefined) {
  const asked: number[] = [];
  const start = Date.now();
  const result = poll(async (round) => {
    asked.push(Date.now() - start);
    return round === answerAt ? (`answer of round ${round}` as T) : undefined;
  });
  await jest.runAllTimersAsync();
  return { asked, result: await result };
}

describe('pollUntil', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it('when the first round answers, then it answers without a pause', async () => {
    const { asked, result } = await rounds((ask) => pollUntil({ until: Date.now() + 1000, pauseMs: 100 }, ask), 1);
    expect(asked).toEqual([0]);
    expect(result).toBe('answer of round 1');
  });

  it('when the third round answers, then the rounds are one fixed pause apart', async () => {
    const { asked, result } = await rounds((ask) => pollUntil({ until: Date.now() + 1000, pauseMs: 100 }, ask), 3);
    expect(asked).toEqual([0, 100, 200]);
    expect(result).toBe('answer of round 3');
  });

  it('when no round answers, then it stops before a pause would end after `until`, answering undefined', async () => {
    const { asked, result } = await rounds((ask) => pollUntil({ until: Date.now() + 350, pauseMs: 100 }, ask), undefined);
    expect(asked).toEqual([0, 100, 200, 300]);
    expect(result).toBeUndefined();
  });

  it('when the pause is a backoff, then each pause is the one computed for the round before it', async () => {
    const backoff = (round: number): number => Math.min(100 * 2 ** (round - 1), 400);
    const { asked } = await rounds((ask) => pollUntil({ until: Date.now() + 2000, pauseMs: backoff }, ask), undefined);
    expect(asked).toEqual([0, 100, 300, 700, 1100, 1500, 1900]);
  });

  it('when `until` has already passed, then it still asks once', async () => {
    const { asked, result } = await rounds((ask) => pollUntil({ until: Date.now() - 1, pauseMs: 100 }, ask), undefined);
    expect(asked).toEqual([0]);
    expect(result).toBeUndefined();
  });

  it('when a round rejects, then the poll rejects with it and asks no more', async () => {
    let asked = 0;
    const poll = pollUntil({ until: Date.now() + 1000, pauseMs: 100 }, async () => {
      asked++;
      if (asked === 2) throw new Error('refused');
      return undefined;
    });
    const settled = poll.then(
      () => 'resolved',
      (err: Error) => err.message,
    );
    await jest.runAllTimersAsync();
    expect(await settled).toBe('refused');
    expect(asked).toBe(2);
  });
});
