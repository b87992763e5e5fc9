import { atLeast, hasLinearizableMemberList, parseVersion, ServerVersions } from '../../agent/etcd/server-version';

describe('etcd server version rules', () => {
  it.each<[string | undefined, [number, number, number] | undefined]>([
    ['3.4.23', [3, 4, 23]],
    ['3.6.16', [3, 6, 16]],
    ['3.7.0-alpha.0', [3, 7, 0]],
    ['3.5', undefined],
    ['', undefined],
    [undefined, undefined],
  ])('when the version is %j, then it reads as %j', (version, parsed) => {
    expect(parseVersion(version)).toEqual(parsed);
  });

  // [version, MemberList honours `linearizable`] — the field came with etcd 3.5 (etcd-io/etcd#11639).
  it.each<[string | undefined, boolean]>([
    ['3.4.23', false],
    ['3.4.45', false],
    ['3.5.0', true],
    ['3.5.35', true],
    ['3.6.16', true],
    ['3.7.3', true],
    ['4.0.0', true],
    // Unknown (no Status answer yet): as the oldest, so the barrier read comes first.
    [undefined, false],
    ['garbage', false],
  ])('when an endpoint runs etcd %j, then a linearizable MemberList needs no barrier read: %s', (version, linearizable) => {
    expect(hasLinearizableMemberList(version)).toBe(linearizable);
  });

  it.each<[string, [number, number, number], boolean]>([
    ['3.5.18', [3, 5, 19], false],
    ['3.5.19', [3, 5, 19], true],
    ['3.6.0', [3, 5, 19], true],
    ['3.4.99', [3, 5, 0], false],
  ])('when %s is compared with %j, then at least is %s', (version, [a, b, c], expected) => {
    expect(atLeast(version, a, b, c)).toBe(expected);
  });

  it('when an endpoint reported its version, then it is found by the same URL written differently', () => {
    const versions = new ServerVersions();
    versions.learn('http://Etcd-0.local:2379/', '3.6.16');
    versions.learn('http://etcd-1.local:2379', '');

    expect(versions.of('http://etcd-0.local:2379')).toBe('3.6.16');
    expect(versions.of('http://etcd-1.local:2379')).toBeUndefined();
  });

  it('when asking an endpoint for its version failed, then it is not asked again for 10 s', () => {
    const versions = new ServerVersions();
    versions.askFailed('http://etcd-0:2379', 1000);

    expect(versions.worthAsking('http://etcd-0:2379', 10_999)).toBe(false);
    expect(versions.worthAsking('http://etcd-0:2379', 11_000)).toBe(true);
    expect(versions.worthAsking('http://etcd-1:2379', 1000)).toBe(true);
  });
});
