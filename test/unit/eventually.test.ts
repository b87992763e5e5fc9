import { eventually, patience, timeScale } from '../helpers/eventually';

/** A check that fails (throws, or answers `false` with `how: 'false'`) until its `passAt`-th try (never when undefined). */
function checkPassingAt(passAt: number | undefined, how: 'throw' | 'false' = 'throw') {
  const triedAt: number[] = [];
  const start = Date.now();
  const check = async (): Promise<string | false> => {
    triedAt.push(Date.now() - start);
    if (triedAt.length === passAt) return `passed on try ${triedAt.length}`;
    if (how === 'false') return false;
    throw new Error(`not yet (try ${triedAt.length})`);
  };
  return { check, triedAt };
}

/** Runs `eventually` under fake timers to its end: what it answered or rejected with, and when each try was made. */
async function settle(passAt: number | undefined, within: number, opts: { every?: number; how?: 'throw' | 'false' } = {}) {
  const { check, triedAt } = checkPassingAt(passAt, opts.how);
  const outcome = eventually(check, { within, every: opts.every }).then(
    (value) => ({ value }),
    (error: Error) => ({ error: error.message }),
  );
  await jest.runAllTimersAsync();
  return { ...(await outcome), triedAt };
}

describe('eventually', () => {
  const saved = process.env.TEST_TIME_SCALE;
  beforeEach(() => {
    jest.useFakeTimers({ now: 1_000_000 });
    delete process.env.TEST_TIME_SCALE;
  });
  afterEach(() => {
    jest.useRealTimers();
    if (saved === undefined) delete process.env.TEST_TIME_SCALE;
    else process.env.TEST_TIME_SCALE = saved;
  });

  it.each([
    ['the first try passes, then it answers without a pause', 1, 1000, undefined, { value: 'passed on try 1' }, [0]],
    [
      'the third try passes, then the tries are one pause apart (200 ms by default)',
      3,
      1000,
      undefined,
      { value: 'passed on try 3' },
      [0, 200, 400],
    ],
    ['`every` is given, then it is the pause', 3, 1000, 50, { value: 'passed on try 3' }, [0, 50, 100]],
    [
      'no try passes, then it rejects with the last error, and makes no try that a pause would start past the patience',
      undefined,
      350,
      100,
      { error: 'not yet (try 4)' },
      [0, 100, 200, 300],
    ],
    ['the patience is 0, then it makes one try all the same', undefined, 0, 100, { error: 'not yet (try 1)' }, [0]],
  ])('when %s', async (_when, passAt, within, every, outcome, triedAt) => {
    expect(await settle(passAt, within, { every })).toEqual({ ...outcome, triedAt });
  });

  it("when every try throws, then the rejection is the last try's own error (an `expect` in the check reports its own difference)", async () => {
    const errors: Error[] = [];
    const failing = eventually(
      async () => {
        errors.push(new Error(`try ${errors.length + 1}`));
        throw errors[errors.length - 1];
      },
      { within: 500, every: 100 },
    );
    const rejected = failing.catch((error: unknown) => error);
    await jest.runAllTimersAsync();
    expect(await rejected).toBe(errors[errors.length - 1]);
    expect(errors).toHaveLength(6);
  });

  it('when the check answers false until a try answers a value, then that value; when it answers false to the end, then an error saying so', async () => {
    expect(await settle(2, 1000, { how: 'false' })).toEqual({ value: 'passed on try 2', triedAt: [0, 200] });
    expect(await settle(undefined, 450, { how: 'false' })).toEqual({
      error: 'the check still answered false after 3 tries within 450 ms',
      triedAt: [0, 200, 400],
    });
  });

  it.each([
    ['unset', undefined, [0, 100, 200, 300]],
    ['1', '1', [0, 100, 200, 300]],
    ['2', '2', [0, 100, 200, 300, 400, 500, 600, 700]],
    ['2.5', '2.5', [0, 100, 200, 300, 400, 500, 600, 700, 800]],
  ])('when TEST_TIME_SCALE is %s, then it multiplies the patience (350 ms here), not the pause', async (_scale, value, triedAt) => {
    if (value !== undefined) process.env.TEST_TIME_SCALE = value;
    const settled = await settle(undefined, 350, { every: 100 });
    expect(settled.triedAt).toEqual(triedAt);
  });

  it('when TEST_TIME_SCALE lengthens the patience past the try that passes, then it passes where it would have failed', async () => {
    expect(await settle(6, 350, { every: 100 })).toMatchObject({ error: 'not yet (try 4)' });
    process.env.TEST_TIME_SCALE = '2';
    expect(await settle(6, 350, { every: 100 })).toMatchObject({ value: 'passed on try 6' });
  });

  it.each(['0', '-1', 'abc', '2x', '1e3', 'NaN', 'Infinity', '1,5'])(
    'when TEST_TIME_SCALE is %j, then eventually refuses it, naming the setting and the value',
    async (value) => {
      process.env.TEST_TIME_SCALE = value;
      const { check, triedAt } = checkPassingAt(1);
      await expect(eventually(check, { within: 1000 })).rejects.toThrow(
        `TEST_TIME_SCALE must be a positive number (how many times longer the tests may wait for an event; default 1), not ${JSON.stringify(value)}`,
      );
      expect(triedAt).toEqual([]);
    },
  );
});

describe('timeScale and patience', () => {
  it.each([
    [{}, 1],
    [{ TEST_TIME_SCALE: '' }, 1],
    [{ TEST_TIME_SCALE: '3' }, 3],
    [{ TEST_TIME_SCALE: ' 1.5 ' }, 1.5],
    [{ TEST_TIME_SCALE: '.5' }, 0.5],
  ])('when the environment is %j, then the scale is %d', (env, scale) => {
    expect(timeScale(env)).toBe(scale);
    expect(patience(1000, env)).toBe(1000 * scale);
  });

  it('when TEST_TIME_SCALE is not a number, then patience refuses it', () => {
    expect(() => patience(1000, { TEST_TIME_SCALE: 'slow' })).toThrow(/^TEST_TIME_SCALE must be a positive number .*, not "slow"$/);
  });
});
