/**
 * One home per rule: the member-name rule (proto/names.ts) and the URL normal forms (proto/urls.ts)
 * are the ones every layer uses, and the layers below membership/ and health/ import them from proto/.
 */
import fs from 'node:fs';
import path from 'node:path';
import { canonicalUrl as healthCanonicalUrl } from '../../agent/health/classify';
import * as match from '../../agent/membership/match';
import { isDnsSubdomain, isValidMemberName } from '../../agent/proto/names';
import * as urls from '../../agent/proto/urls';

const AGENT = path.resolve(__dirname, '../../agent');

/** The agent/ modules `file` imports by relative path, as paths under agent/ ("membership/match"). */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(path.join(AGENT, file), 'utf8');
  return [...text.matchAll(/from '(\.{1,2}\/[^']+)'/g)].map((m) => path.relative(AGENT, path.resolve(path.dirname(path.join(AGENT, file)), m[1])));
}

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
    expect(match.isValidMemberName(name)).toBe(valid);
  });
});

describe('the URL normal forms', () => {
  it('when membership and health compare URLs, then they use the functions of proto/urls.ts', () => {
    expect(match.normalizeUrl).toBe(urls.normalizeUrl);
    expect(match.validatePeerUrl).toBe(urls.validatePeerUrl);
    expect(match.peerUrlFromTemplate).toBe(urls.peerUrlFromTemplate);
    expect(match.peerUrlFromFqdn).toBe(urls.peerUrlFromFqdn);
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

describe('layers import downward only', () => {
  const proto = fs.readdirSync(path.join(AGENT, 'proto')).filter((f) => f.endsWith('.ts'));

  it.each(proto.map((f) => [`proto/${f}`]))('when %s imports agent code, then only from proto/', (file) => {
    expect(importsOf(file).filter((p) => !p.startsWith('proto/'))).toEqual([]);
  });

  const kubeInject = fs.readdirSync(path.join(AGENT, 'cli')).filter((f) => f.startsWith('kube-inject') && f.endsWith('.ts'));

  it.each([['config.ts'], ...kubeInject.map((f) => [`cli/${f}`])])(
    'when %s imports agent code, then nothing from membership/ or health/',
    (file) => {
      expect(importsOf(file).filter((p) => p.startsWith('membership/') || p.startsWith('health/'))).toEqual([]);
    },
  );
});
