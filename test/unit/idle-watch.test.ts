import { PassThrough } from 'node:stream';
import { watchIdle } from '../../agent/lib/idle-watch';

const IDLE_MS = 1000;

/** A flowing stream (a reader takes every chunk) and the silences watchIdle reported on it. */
function watched(): { stream: PassThrough; silences: number[] } {
  const stream = new PassThrough();
  const silences: number[] = [];
  stream.on('data', () => undefined);
  watchIdle(stream, IDLE_MS, (silentMs) => silences.push(silentMs));
  return { stream, silences };
}

/** Lets the stream's own ticks run, then moves the clock on by `ms`. */
async function after(ms: number): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  jest.advanceTimersByTime(ms);
  await new Promise((resolve) => setImmediate(resolve));
}

describe('watchIdle', () => {
  beforeEach(() => jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask', 'setImmediate'] }));
  afterEach(() => jest.useRealTimers());

  it('when a flowing stream sends nothing for the idle time, then it is reported once', async () => {
    const { silences } = watched();
    await after(IDLE_MS - 250);
    expect(silences).toEqual([]);
    await after(3 * IDLE_MS);
    expect(silences).toHaveLength(1);
    expect(silences[0]).toBeGreaterThanOrEqual(IDLE_MS);
  });

  it('when chunks keep coming, each within the idle time, then nothing is reported', async () => {
    const { stream, silences } = watched();
    for (let i = 0; i < 10; i++) {
      await after(IDLE_MS / 2);
      stream.write(Buffer.from('x'));
    }
    expect(silences).toEqual([]);
  });

  it('when its reader holds it paused (backpressure), then that time does not count, and the count starts again on resume', async () => {
    const { stream, silences } = watched();
    stream.pause();
    await after(10 * IDLE_MS);
    expect(silences).toEqual([]);
    stream.resume();
    await after(IDLE_MS / 2);
    expect(silences).toEqual([]);
    await after(IDLE_MS);
    expect(silences).toHaveLength(1);
  });

  it('when the stream closes, then the watch ends with it', async () => {
    const { stream, silences } = watched();
    stream.destroy();
    await after(10 * IDLE_MS);
    expect(silences).toEqual([]);
  });
});
