import { joinRequestSchema } from '../../agent/proto/requests';
import { allowedMethods, hasForeignCharset, routePath, unexpectedQueryParameter } from '../../agent/server/request-guard';

describe('request guard (pure parts)', () => {
  it.each([
    ['/v1/members/join', '/v1/members/join'],
    ['/V1/Members/JOIN', '/v1/members/join'],
    ['/v1/members/join/', '/v1/members/join'],
    ['/', '/'],
  ])('when Express routes %p, then the guard checks it as %p', (path, expected) => {
    expect(routePath(path)).toBe(expected);
  });

  it.each<[string, string[], string | undefined]>([
    ['/v1/health', ['expected'], undefined],
    ['/v1/health', ['expected', 'x'], 'x'],
    ['/v1/health/local', ['voter'], undefined],
    ['/v1/health/local', ['expected'], 'expected'],
    ['/v1/members', ['limit'], 'limit'],
    ['/v1/members/join', ['force'], 'force'],
    ['/V1/MEMBERS/JOIN/', ['force'], 'force'],
    ['/v1.0/action', ['a'], 'a'],
    ['/livez', ['verbose'], undefined],
    ['/metrics', ['name[]'], undefined],
    ['/no/such/route', ['x'], undefined],
  ])('when %s gets query keys %p, then the unexpected one is %p', (path, keys, expected) => {
    expect(unexpectedQueryParameter(path, keys)).toBe(expected);
  });

  it.each<[string, string[] | undefined]>([
    ['/v1/members/join', ['POST']],
    ['/v1/members', ['GET', 'HEAD']],
    ['/livez', ['GET', 'HEAD']],
    ['/nope', undefined],
  ])('when the path is %s, then the allowed methods are %p', (path, expected) => {
    expect(allowedMethods(path)).toEqual(expected);
  });

  it.each<[string | undefined, boolean]>([
    [undefined, false],
    ['application/json', false],
    ['application/json; charset=utf-8', false],
    ['application/json; charset=UTF8', false],
    ['application/json;charset="utf-8"', false],
    ['application/json; charset=utf-16', true],
    ['application/json; charset=latin1', true],
    ['application/json; charset=utf-32le', true],
  ])('when the Content-Type is %p, then a foreign charset is %p', (contentType, expected) => {
    expect(hasForeignCharset(contentType)).toBe(expected);
  });
});

describe('peer URL hosts in request bodies', () => {
  const join = (url: string): boolean => joinRequestSchema.safeParse({ name: 'etcd-3', peerURLs: [url] }).success;

  it.each([
    ['http://etcd-3.etcd-headless.demo.svc.cluster.local:2380', true],
    ['https://10.0.0.3:2380', true],
    ['http://[fd00::3]:2380', true],
    [`http://${'a'.repeat(63)}.example:2380`, true],
    [`http://${'a'.repeat(64)}.example:2380`, false],
    [`http://${'a.'.repeat(127)}a:2380`, false],
    ['http://a..b:2380', false],
    ['http://.a:2380', false],
    ['http://a.:2380', false],
    [`http://${'a'.repeat(600)}:2380`, false],
  ])('when the peer URL is %p, then it is accepted: %p', (url, ok) => {
    expect(join(url)).toBe(ok);
  });

  it('when a peer URL is huge, then the refusal does not echo it whole', () => {
    const parsed = joinRequestSchema.safeParse({ name: 'etcd-3', peerURLs: [`http://${'a'.repeat(60_000)}:2380`] });
    expect(parsed.success).toBe(false);
    expect(JSON.stringify(parsed.error?.issues).length).toBeLessThan(1000);
  });
});
