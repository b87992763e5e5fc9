import { requestKey, SingleFlight } from '../../agent/membership/single-flight';

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('SingleFlight', () => {
  it('when identical calls arrive while one is in flight, then they share one execution and one answer', async () => {
    const flights = new SingleFlight<object>();
    const gate = deferred<object>();
    let runs = 0;
    const run = (): Promise<object> => {
      runs++;
      return gate.promise;
    };

    const calls = Array.from({ length: 20 }, () => flights.do('join etcd-3', run));
    await Promise.resolve();
    expect(flights.size).toBe(1);
    const answer = { outcome: 'added' };
    gate.resolve(answer);
    const answers = await Promise.all(calls);

    expect(runs).toBe(1);
    answers.forEach((a) => expect(a).toBe(answer));
    expect(flights.size).toBe(0);
  });

  it('when executions are in flight, then settled() waits until each has settled, failed ones too', async () => {
    const flights = new SingleFlight<string>();
    const ok = deferred<string>();
    const failing = deferred<string>();
    void flights.do('a', () => ok.promise);
    void flights.do('b', () => failing.promise).catch(() => undefined);
    let settled = false;
    const waiting = flights.settled().then(() => (settled = true));

    ok.resolve('done');
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    failing.reject(new Error('closed'));
    await waiting;

    expect(settled).toBe(true);
    expect(flights.size).toBe(0);
  });

  it('when nothing is in flight, then settled() settles at once', async () => {
    await expect(new SingleFlight<string>().settled()).resolves.toBeUndefined();
  });

  it('when the execution fails, then every caller gets the same error and the next call runs again', async () => {
    const flights = new SingleFlight<string>();
    const boom = new Error('busy');
    let runs = 0;
    const failing = (): Promise<string> => {
      runs++;
      return Promise.reject(boom);
    };

    const results = await Promise.allSettled([flights.do('k', failing), flights.do('k', failing)]);
    const again = await flights.do('k', async () => 'second');

    expect(results).toEqual([
      { status: 'rejected', reason: boom },
      { status: 'rejected', reason: boom },
    ]);
    expect(runs).toBe(1);
    expect(again).toBe('second');
  });

  it('when the work throws synchronously, then the caller gets a rejection and the key is free again', async () => {
    const flights = new SingleFlight<string>();

    await expect(
      flights.do('k', () => {
        throw new Error('sync');
      }),
    ).rejects.toThrow('sync');

    expect(flights.size).toBe(0);
    await expect(flights.do('k', async () => 'ok')).resolves.toBe('ok');
  });

  it('when calls have different keys, then each runs on its own', async () => {
    const flights = new SingleFlight<string>();
    const order: string[] = [];

    const [a, b] = await Promise.all([
      flights.do('a', async () => (order.push('a'), 'A')),
      flights.do('b', async () => (order.push('b'), 'B')),
    ]);

    expect([a, b]).toEqual(['A', 'B']);
    expect(order.sort()).toEqual(['a', 'b']);
  });
});

describe('requestKey', () => {
  it.each<[string, unknown, unknown, boolean]>([
    ['the same fields in another order', { name: 'etcd-3', wait: true }, { wait: true, name: 'etcd-3' }, true],
    ['nested objects in another order', { a: { x: 1, y: 2 } }, { a: { y: 2, x: 1 } }, true],
    ['a field left undefined', { name: 'etcd-3', learner: undefined }, { name: 'etcd-3' }, true],
    ['another value', { name: 'etcd-3' }, { name: 'etcd-4' }, false],
    ['another peer URL order', { peerURLs: ['a', 'b'] }, { peerURLs: ['b', 'a'] }, false],
    ['an extra field', { name: 'etcd-3' }, { name: 'etcd-3', wait: true }, false],
    ['a string against a number', { t: '1' }, { t: 1 }, false],
  ])('when two requests differ by %s, then their keys are equal: %s', (_what, a, b, equal) => {
    expect(requestKey('memberJoin', a) === requestKey('memberJoin', b)).toBe(equal);
  });

  it('when two actions get the same body, then their keys differ', () => {
    expect(requestKey('memberJoin', { name: 'etcd-3' })).not.toBe(requestKey('memberPromote', { name: 'etcd-3' }));
  });
});
