import { delay, within } from '../../agent/lib/deadline';
import { freshTogether, SharedObservation } from '../../agent/health/shared-observation';

/** An observe function whose calls are counted and each resolves when the test says so. */
function controlled(): {
  observe: () => Promise<number>;
  calls: () => number;
  finish: (value: number) => void;
} {
  const pending: Array<(value: number) => void> = [];
  let calls = 0;
  return {
    observe: () => {
      calls++;
      return new Promise<number>((resolve) => pending.push(resolve));
    },
    calls: () => calls,
    finish: (value) => pending.shift()?.(value),
  };
}

describe('SharedObservation', () => {
  it('when 100 callers ask at once, then one observation answers them all', async () => {
    const c = controlled();
    const shared = new SharedObservation(1000, c.observe);

    const answers = Promise.all(Array.from({ length: 100 }, () => shared.get()));
    await delay(5);
    c.finish(7);

    expect((await answers).map((a) => a?.value)).toEqual(Array(100).fill(7));
    expect(c.calls()).toBe(1);
  });

  describe('refreshing ahead (on a fake clock, so that load cannot bend the timing)', () => {
    beforeEach(() => jest.useFakeTimers());
    afterEach(() => jest.useRealTimers());

    it.each<[string, number]>([
      ['quick (a twentieth of the max age)', 50],
      ['slow (over half the max age, as with a silent member)', 520],
    ])(
      'when callers keep asking every 50 ms and an observation is %s, then once warm no caller waits and none is served stale',
      async (_what, takesMs) => {
        let calls = 0;
        const maxAgeMs = 1000;
        const shared = new SharedObservation(maxAgeMs, async () => {
          calls++;
          await delay(takesMs);
          return calls;
        });
        const first = shared.get();
        await jest.advanceTimersByTimeAsync(takesMs);
        await first;

        const waited: number[] = [];
        for (let i = 0; i < 200; i++) {
          const arrival = performance.now();
          const answered = { yet: false };
          const asked = shared.get(arrival).finally(() => (answered.yet = true));
          // Without the clock moving, only an observation that had already finished can answer.
          await jest.advanceTimersByTimeAsync(0);
          if (!answered.yet && i >= 40) waited.push(i); // the first 2 s warm up: the first refresh follows the first observation
          await jest.advanceTimersByTimeAsync(50);
          while (!answered.yet) await jest.advanceTimersByTimeAsync(10);
          const got = await asked;
          expect(got).toBeDefined();
          expect(arrival - (got?.startedAt ?? -Infinity)).toBeLessThanOrEqual(maxAgeMs);
        }

        expect(waited).toEqual([]);
        // Load follows the max age, not the 20 callers a second.
        expect(calls).toBeLessThanOrEqual(Math.ceil((200 * 50) / (maxAgeMs - takesMs - 50 - takesMs / 10 - 150)) + 3);
      },
    );
  });

  describe('on a fake clock (time is the subject, so load cannot bend it)', () => {
    beforeEach(() => jest.useFakeTimers());
    afterEach(() => jest.useRealTimers());

    it('when a finished observation is younger than the max age, then it is served without a new one', async () => {
      let calls = 0;
      const shared = new SharedObservation(5000, async () => ++calls);

      await shared.get();
      await jest.advanceTimersByTimeAsync(4000);
      const again = await shared.get();

      expect(again?.value).toBe(1);
      expect(calls).toBe(1);
    });

    it('when a caller asks for evidence begun after a point, then a fresh observation begun before it is not served, and a new one is shared', async () => {
      let calls = 0;
      const shared = new SharedObservation(5000, async () => ++calls);
      await shared.get();
      await jest.advanceTimersByTimeAsync(10);
      const point = performance.now();

      const [a, b] = await Promise.all([shared.get(performance.now(), point), shared.get(performance.now(), point)]);

      expect([a?.value, b?.value]).toEqual([2, 2]);
      expect(a?.startedAt).toBeGreaterThanOrEqual(point);
      expect((await shared.get())?.value).toBe(2);
    });

    it('when the last observation started more than the max age ago, then a new one is made', async () => {
      let calls = 0;
      const shared = new SharedObservation(50, async () => ++calls);

      await shared.get();
      await jest.advanceTimersByTimeAsync(70);
      const again = await shared.get();

      expect(again?.value).toBe(2);
      expect(performance.now() - (again?.startedAt ?? -Infinity)).toBeLessThanOrEqual(50);
    });

    it('when the next observation hangs, then the caller gets undefined at the max age, never the previous result', async () => {
      let calls = 0;
      const shared = new SharedObservation(100, () => (++calls === 1 ? Promise.resolve('healthy') : new Promise<string>(() => undefined)));
      expect((await shared.get())?.value).toBe('healthy');
      await jest.advanceTimersByTimeAsync(120);

      const settled: Array<string | undefined> = [];
      void shared.get().then((answer) => settled.push(answer?.value));
      await jest.advanceTimersByTimeAsync(99);
      expect(settled).toEqual([]);
      await jest.advanceTimersByTimeAsync(1);

      expect(settled).toEqual([undefined]);
      expect(shared.newest?.value).toBe('healthy'); // kept for the age gauge, but not served
    });

    it('when an observation finishes later than the max age after it started, then it is not served', async () => {
      const c = controlled();
      const shared = new SharedObservation(60, c.observe);

      const first = shared.get();
      await jest.advanceTimersByTimeAsync(80);
      c.finish(1);

      expect(await first).toBeUndefined();
      await jest.advanceTimersByTimeAsync(0);
      expect(shared.newest?.value).toBe(1);
    });

    it('when a caller joins an observation in flight, then it waits for that one instead of starting another', async () => {
      const c = controlled();
      const shared = new SharedObservation(500, c.observe);

      const early = shared.get();
      await jest.advanceTimersByTimeAsync(20);
      const late = shared.get();
      c.finish(3);

      expect((await early)?.value).toBe(3);
      expect((await late)?.value).toBe(3);
      expect(c.calls()).toBe(1);
    });

    describe('freshTogether: results judged fresh at one instant, their ages measured from it', () => {
      /** An observation that takes `takesMs` on the fake clock, or never finishes after the first `answered` ones. */
      const timed = (takesMs: number, answered = Infinity) => {
        let calls = 0;
        return new SharedObservation(300, async () => {
          if (++calls > answered) return new Promise<number>(() => undefined);
          await delay(takesMs);
          return calls;
        });
      };

      it('when one result ages past the max age while a slower one is awaited, then it is asked for again and every age is within the max age', async () => {
        const quick = timed(100);
        const slow = timed(200);
        const first = quick.get();
        await jest.advanceTimersByTimeAsync(100);
        expect((await first)?.value).toBe(1);
        await jest.advanceTimersByTimeAsync(150); // quick's result is 250 ms old: fresh, but not for another 200

        const together = freshTogether([quick, slow], performance.now());
        await jest.advanceTimersByTimeAsync(200);
        const { found, at } = await together;

        expect(found.map((observed) => observed?.value)).toEqual([2, 1]);
        expect(found.map((observed) => at - (observed?.startedAt ?? -Infinity))).toEqual([200, 200]);
      });

      it('when a result ages past the max age and no fresh one comes in time, then it is not found, never served stale', async () => {
        const stalling = timed(100, 1);
        const slow = timed(200);
        const first = stalling.get();
        await jest.advanceTimersByTimeAsync(100);
        expect((await first)?.value).toBe(1);
        await jest.advanceTimersByTimeAsync(150);

        const arrival = performance.now();
        const together = freshTogether([stalling, slow], arrival);
        await jest.advanceTimersByTimeAsync(300);
        const { found, at } = await together;

        expect(found.map((observed) => observed?.value)).toEqual([undefined, 1]);
        expect(at - arrival).toBe(300);
        expect(at - (found[1]?.startedAt ?? -Infinity)).toBeLessThanOrEqual(300);
      });
    });
  });

  it('when an observation fails, then its callers see the failure and the next caller starts afresh', async () => {
    let calls = 0;
    const shared = new SharedObservation(500, async () => {
      if (++calls === 1) throw new Error('bug');
      return 'ok';
    });

    await expect(shared.get()).rejects.toThrow('bug');
    expect((await shared.get())?.value).toBe('ok');
  });
});

describe('within', () => {
  it('when the promise is slower than the limit, then it resolves undefined at the limit, not before', async () => {
    jest.useFakeTimers();
    try {
      const settled: unknown[] = [];
      void within(new Promise(() => undefined), 30).then((value) => settled.push(value));
      await jest.advanceTimersByTimeAsync(29);
      expect(settled).toEqual([]);
      await jest.advanceTimersByTimeAsync(1);
      expect(settled).toEqual([undefined]);
    } finally {
      jest.useRealTimers();
    }
  });

  it('when the promise is faster, then it resolves its value', async () => {
    expect(await within(Promise.resolve(5), 1000)).toBe(5);
  });
});
