/**
 * One home per rule: the member-name rule (proto/names.ts) and the URL normal forms (proto/urls.ts)
 * are the ones every layer uses, and the layers below membership/ and health/ import them from proto/.
 */
import { canonicalUrl as healthCanonicalUrl } from '../../agent/health/classify';
import { isDnsSubdomain, isValidMemberName } from '../../agent/proto/names';
import * as urls from '../../agent/proto/urls';

describe('the member-name rule', () => {
  it.each<[string, boolean]>([
    ['etcd-0', true],
    ['etcd-0.etcd-headless', true],
    ['a', true],
    ['a'.repeat(253), true],
    ['a'.repeat(254), false],
    ['', false],
    ['Etcd-0', false],
    ['etcd_0', false],
    ['-etcd', false],
    ['etcd-', false],
    ['etcd..0', false],
  ])('when the name is %j, then valid is %s (the same for a member and any Kubernetes name)', (name, valid) => {
    expect(isValidMemberName(name)).toBe(valid);
    expect(isDnsSubdomain(name)).toBe(valid);
  });
});

describe('the URL normal forms', () => {
  it('when health compares URLs, then it uses the function of proto/urls.ts', () => {
    expect(healthCanonicalUrl).toBe(urls.canonicalUrl);
  });

  it.each<[string, string]>([
    ['HTTP://Etcd-0:2379/', 'http://etcd-0:2379'],
    ['https://etcd-0', 'https://etcd-0:443'],
    ['http://[0:0::1]:2379', 'http://[::1]:2379'],
  ])('when %j is normalised, then both forms give %j', (raw, normal) => {
    expect(urls.normalizeUrl(raw)).toBe(normal);
    expect(urls.canonicalUrl(raw)).toBe(normal);
  });

  it('when a URL cannot be parsed, then canonicalUrl still answers (lowercased, trimmed) where normalizeUrl refuses', () => {
    expect(urls.canonicalUrl(' Not A URL/ ')).toBe('not a url');
    expect(() => urls.normalizeUrl('Not A URL')).toThrow(/is not an http or https URL/);
  });
});
