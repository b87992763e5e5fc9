import { AgentError, isAgentError } from '../../agent/proto/errors';
import type { Member } from '../../agent/proto/types';
import {
  describeMember,
  matchMember,
  memberPhase,
  summarizeCluster,
  toConflictError,
  wantedMember,
  type MatchResult,
  type MatchWanted,
} from '../../agent/membership/match';
import { isValidMemberName } from '../../agent/proto/names';
import { normalizeUrl, peerUrlFromFqdn, peerUrlFromTemplate, validatePeerUrl } from '../../agent/proto/urls';
import { thrownBy } from '../helpers/thrown';

function member(id: string, name: string, peerURLs: string[], isLearner = false, started = name !== ''): Member {
  return { id, name, peerURLs, clientURLs: [], isLearner, started };
}

const etcd0 = member('8e9e05c52164694d', 'etcd-0', ['http://etcd-0.etcd-headless:2380']);
const etcd1 = member('91bc3c398fb3c146', 'etcd-1', ['http://etcd-1.etcd-headless:2380']);
const learner2 = member('fd422379fda50e48', 'etcd-2', ['http://etcd-2.etcd-headless:2380'], true);
const unstarted3 = member('628170c800dbcee', '', ['http://etcd-3.etcd-headless:2380'], true);
// Reported the way its flags were written: upper case, trailing slash, a default port left out.
const etcd4 = member('a1b2c3', 'etcd-4', ['HTTP://ETCD-4.Etcd-Headless:2380/', 'https://etcd-4.internal']);
const MEMBERS = [etcd0, etcd1, learner2, unstarted3, etcd4];

describe('normalizeUrl and validatePeerUrl', () => {
  it.each([
    ['http://etcd-0.etcd-headless:2380', 'http://etcd-0.etcd-headless:2380'],
    ['HTTP://ETCD-0.Etcd-Headless:2380', 'http://etcd-0.etcd-headless:2380'],
    ['http://etcd-0:2380/', 'http://etcd-0:2380'],
    ['https://etcd-0:2380', 'https://etcd-0:2380'],
    ['http://10.0.0.1:02380', 'http://10.0.0.1:2380'],
    ['http://[::1]:2380', 'http://[::1]:2380'],
    ['http://[FE80:0:0::1]:2380/', 'http://[fe80::1]:2380'],
    ['https://[2001:DB8::A]:443', 'https://[2001:db8::a]:443'],
    ['http://etcd_0.local:2380', 'http://etcd_0.local:2380'],
  ])('when a URL %s has a port, then both give %s', (raw, normal) => {
    expect(normalizeUrl(raw)).toBe(normal);
    expect(validatePeerUrl(raw)).toBe(normal);
  });

  it.each([
    ['http://etcd-0', 'http://etcd-0:80'],
    ['http://etcd-0/', 'http://etcd-0:80'],
    ['https://etcd-0', 'https://etcd-0:443'],
    ['HTTPS://ETCD-0/', 'https://etcd-0:443'],
    ['http://[::1]', 'http://[::1]:80'],
  ])('when a URL %s has no port, then normalizeUrl gives %s and validatePeerUrl rejects it', (raw, normal) => {
    expect(normalizeUrl(raw)).toBe(normal);
    const err = thrownBy(() => validatePeerUrl(raw));
    expect(isAgentError(err, 'bad-request')).toBe(true);
    expect((err as AgentError).message).toBe(`peer URL "${raw}" must name a port`);
  });

  it.each([
    ['ftp://etcd-0:2380', 'must use http or https'],
    ['unix://etcd-0:2380', 'must use http or https'],
    ['etcd-0:2380', 'is not an http or https URL with a host'],
    ['', 'is not an http or https URL with a host'],
    [' http://etcd-0:2380', 'is not an http or https URL with a host'],
    ['http://user@etcd-0:2380', 'must not carry a user'],
    ['http://user:secret@etcd-0:2380', 'must not carry a user'],
    ['http://etcd-0:2380/peer', 'must not carry a path'],
    ['http://etcd-0:2380//', 'must not carry a path'],
    ['http://etcd-0:2380 ', 'has an invalid port'],
    ['http://etcd-0\\evil:2380', 'must not carry a path'],
    ['http://etcd-0:2380?x=1', 'must not carry a query'],
    ['http://etcd-0:2380/?', 'must not carry a query'],
    ['http://etcd-0:2380#top', 'must not carry a fragment'],
    ['http://:2380', 'has no host'],
    ['http:///', 'has no host'],
    ['http://etcd 0:2380', 'has an invalid host'],
    ['http://[::g]:2380', 'has an invalid IPv6 host'],
    ['http://[::1:2380', 'has an invalid IPv6 host'],
    ['http://etcd-0:', 'has an invalid port'],
    ['http://etcd-0:http', 'has an invalid port'],
    ['http://etcd-0:123456', 'has an invalid port'],
    ['http://etcd-0:0', 'has a port outside 1-65535'],
    ['http://etcd-0:65536', 'has a port outside 1-65535'],
  ])('when a URL is %j, then both reject it: %s', (raw, why) => {
    for (const check of [normalizeUrl, validatePeerUrl]) {
      const err = thrownBy(() => check(raw));
      expect(isAgentError(err, 'bad-request')).toBe(true);
      expect((err as AgentError).message).toBe(`peer URL ${JSON.stringify(raw)} ${why}`);
      expect((err as AgentError).details).toEqual({ url: raw });
    }
  });
});

describe('isValidMemberName', () => {
  it.each([
    ['etcd-0', true],
    ['a', true],
    ['0', true],
    ['etcd-0.etcd-headless.demo', true],
    ['a'.repeat(253), true],
    ['a'.repeat(254), false],
    ['', false],
    ['Etcd-0', false],
    ['-etcd', false],
    ['etcd-', false],
    ['etcd_0', false],
    ['etcd..0', false],
    ['.etcd', false],
    ['etcd.', false],
    ['etcd 0', false],
  ])('when the name is %j, then it is valid: %s', (name, valid) => {
    expect(isValidMemberName(name)).toBe(valid);
  });
});

describe('peer URL derivation', () => {
  it.each([
    [
      'http://{name}.etcd-headless.demo.svc.cluster.local:2380',
      'etcd-3',
      undefined,
      'http://etcd-3.etcd-headless.demo.svc.cluster.local:2380',
    ],
    ['https://{fqdn}:2380', 'etcd-3', 'etcd-3.h.demo.svc', 'https://etcd-3.h.demo.svc:2380'],
    ['http://{fqdn}:2380', 'etcd-3', undefined, 'http://etcd-3:2380'],
    ['http://{name}.{fqdn}:2380', 'a', 'b', 'http://a.b:2380'],
    ['http://{name}-{name}.x:2380', 'a', undefined, 'http://a-a.x:2380'],
    ['http://static:2380', 'a', 'b', 'http://static:2380'],
  ])('when template %s gets name %s and fqdn %s, then the URL is %s', (template, name, fqdn, url) => {
    expect(peerUrlFromTemplate(template, name, fqdn)).toBe(url);
  });

  it.each([
    [undefined, 'http://etcd-3.h.demo.svc:2380'],
    ['http://{name}.h:2380', 'http://etcd-3.h.demo.svc:2380'],
    ['https://{name}.h:2380', 'https://etcd-3.h.demo.svc:2380'],
    ['HTTPS://{fqdn}:12380', 'https://etcd-3.h.demo.svc:2380'],
  ])('when the template is %s, then the kbagent peer URL is %s', (template, url) => {
    expect(peerUrlFromFqdn('etcd-3.h.demo.svc', template)).toBe(url);
  });
});

describe('matchMember', () => {
  it.each<[string, MatchWanted, Member | undefined]>([
    ['the peer URL equals a member', { name: 'etcd-1', peerURLs: ['http://etcd-1.etcd-headless:2380'] }, etcd1],
    ['the requested URL differs only in case and slash', { name: 'etcd-1', peerURLs: ['HTTP://ETCD-1.etcd-headless:2380/'] }, etcd1],
    ['the member reports its URL unnormalised', { name: 'etcd-4', peerURLs: ['http://etcd-4.etcd-headless:2380'] }, etcd4],
    ['the member reports its URL without the default port', { peerURLs: ['https://etcd-4.internal:443'] }, etcd4],
    [
      'one of several requested URLs is the member',
      { name: 'etcd-1', peerURLs: ['http://elsewhere:2380', 'http://etcd-1.etcd-headless:2380'] },
      etcd1,
    ],
    ['only peer URLs are given', { peerURLs: ['http://etcd-0.etcd-headless:2380'] }, etcd0],
    ['only a started voter name is given', { name: 'etcd-0', peerURLs: [] }, etcd0],
    ['only a started learner name is given', { name: 'etcd-2', peerURLs: [] }, learner2],
    ['a started learner is named with its URL', { name: 'etcd-2', peerURLs: ['http://etcd-2.etcd-headless:2380'] }, learner2],
    ['an unstarted member is named with its URL', { name: 'etcd-3', peerURLs: ['http://etcd-3.etcd-headless:2380'] }, unstarted3],
    ['an unstarted member is named without a URL', { name: 'etcd-3', peerURLs: [] }, undefined],
    ['no member has the name or the URL', { name: 'etcd-9', peerURLs: ['http://etcd-9:2380'] }, undefined],
    ['no started member has the name', { name: 'etcd-9', peerURLs: [] }, undefined],
    ['the id is given exactly', { id: '8e9e05c52164694d', peerURLs: [] }, etcd0],
    ['the id is given in upper case', { id: '8E9E05C52164694D', peerURLs: [] }, etcd0],
    ['the id has leading zeros', { id: '0628170c800dbcee', peerURLs: [] }, unstarted3],
    ['the id has a 0x prefix and many zeros', { id: '0x0000000000000000628170C800DBCEE', peerURLs: [] }, unstarted3],
    ['the id names another member than the name does', { id: '8e9e05c52164694d', name: 'etcd-1', peerURLs: [] }, etcd0],
    ['the id is no member', { id: '1234', peerURLs: [] }, undefined],
  ])('when %s, then the match is as expected', (_when, wanted, expected) => {
    const expectedResult: MatchResult = expected === undefined ? { kind: 'none' } : { kind: 'match', member: expected };
    expect(matchMember(MEMBERS, wanted)).toEqual(expectedResult);
  });

  it('when a member has a name but is not started, then the name alone does not find it', () => {
    const odd = member('77', 'etcd-7', ['http://etcd-7:2380'], false, false);
    expect(matchMember([odd], { name: 'etcd-7', peerURLs: [] })).toEqual({ kind: 'none' });
    expect(matchMember([odd], { name: 'etcd-7', peerURLs: ['http://etcd-7:2380'] })).toEqual({ kind: 'match', member: odd });
  });

  it.each<[string, Member[], MatchWanted, string, Member[]]>([
    [
      'the name is taken by a started member with other peer URLs',
      MEMBERS,
      { name: 'etcd-1', peerURLs: ['http://b:2380'] },
      'name etcd-1 is taken by member 91bc3c398fb3c146 with peer URLs http://etcd-1.etcd-headless:2380; requested http://b:2380',
      [etcd1],
    ],
    [
      'the name is taken by a started learner with other peer URLs',
      MEMBERS,
      { name: 'etcd-2', peerURLs: ['http://b'] },
      'name etcd-2 is taken by member fd422379fda50e48 with peer URLs http://etcd-2.etcd-headless:2380; requested http://b:80',
      [learner2],
    ],
    [
      'the peer URL belongs to a started voter with another name',
      MEMBERS,
      { name: 'etcd-9', peerURLs: ['http://etcd-0.etcd-headless:2380'] },
      'peer URL http://etcd-0.etcd-headless:2380 belongs to member 8e9e05c52164694d named etcd-0; requested name etcd-9',
      [etcd0],
    ],
    [
      'the peer URL belongs to a started learner with another name',
      MEMBERS,
      { name: 'etcd-9', peerURLs: ['http://ETCD-2.etcd-headless:2380/'] },
      'peer URL http://etcd-2.etcd-headless:2380 belongs to member fd422379fda50e48 named etcd-2; requested name etcd-9',
      [learner2],
    ],
    [
      'the name matches one member and the peer URL another',
      MEMBERS,
      { name: 'etcd-0', peerURLs: ['http://etcd-1.etcd-headless:2380'] },
      'name etcd-0 is member 8e9e05c52164694d but peer URL http://etcd-1.etcd-headless:2380 belongs to member etcd-1 (91bc3c398fb3c146)',
      [etcd0, etcd1],
    ],
    [
      'the name matches a started member and the peer URL an unstarted one',
      MEMBERS,
      { name: 'etcd-0', peerURLs: ['http://etcd-3.etcd-headless:2380'] },
      'name etcd-0 is member 8e9e05c52164694d but peer URL http://etcd-3.etcd-headless:2380 belongs to member unstarted http://etcd-3.etcd-headless:2380 (628170c800dbcee)',
      [etcd0, unstarted3],
    ],
    [
      'the requested peer URLs belong to two members',
      MEMBERS,
      { peerURLs: ['http://etcd-0.etcd-headless:2380', 'http://etcd-1.etcd-headless:2380'] },
      'requested peer URLs belong to different members: http://etcd-0.etcd-headless:2380 belongs to member etcd-0 (8e9e05c52164694d); http://etcd-1.etcd-headless:2380 belongs to member etcd-1 (91bc3c398fb3c146)',
      [etcd0, etcd1],
    ],
    [
      'two started members share the name',
      [etcd0, member('99', 'etcd-0', ['http://twin:2380'])],
      { name: 'etcd-0', peerURLs: [] },
      'name etcd-0 is used by 2 members: etcd-0 (8e9e05c52164694d), etcd-0 (99)',
      [etcd0, member('99', 'etcd-0', ['http://twin:2380'])],
    ],
  ])('when %s, then it is a conflict saying so', (_when, members, wanted, message, clashing) => {
    const result = matchMember(members, wanted);
    expect(result).toEqual({
      kind: 'conflict',
      message,
      details: {
        requested: { name: wanted.name, peerURLs: wanted.peerURLs.map(normalizeUrl) },
        members: clashing.map((m) => ({ id: m.id, name: m.name, peerURLs: m.peerURLs, started: m.started })),
      },
    });
  });

  it('when a conflict is turned into an error, then it is a 409 conflict with the same message and details', () => {
    const result = matchMember(MEMBERS, { name: 'etcd-1', peerURLs: ['http://b:2380'] });
    if (result.kind !== 'conflict') throw new Error(`expected a conflict, got ${result.kind}`);
    const err = toConflictError(result);
    expect(err).toBeInstanceOf(AgentError);
    expect([err.code, err.status, err.retryable, err.message]).toEqual(['conflict', 409, false, result.message]);
    expect(err.details).toBe(result.details);
  });

  it.each<[string, MatchWanted, string]>([
    [
      'a requested URL is invalid',
      { name: 'etcd-3', peerURLs: ['ftp://etcd-3:2380'] },
      'peer URL "ftp://etcd-3:2380" must use http or https',
    ],
    ['the id is not hex', { id: 'etcd-0', peerURLs: [] }, 'member id "etcd-0" is not hex'],
    ['the id is longer than 64 bits', { id: '18e9e05c52164694d', peerURLs: [] }, 'member id "18e9e05c52164694d" is not hex'],
    ['nothing names a member', { name: '', peerURLs: [] }, 'a member is named by name, peerURLs or id'],
  ])('when %s, then it throws bad-request', (_when, wanted, message) => {
    const err = thrownBy(() => matchMember(MEMBERS, wanted));
    expect(isAgentError(err, 'bad-request')).toBe(true);
    expect((err as AgentError).message).toBe(message);
  });
});

describe('summarizeCluster and memberPhase', () => {
  it.each<[string, Member[], { members: number; voters: number; learners: number }]>([
    ['no members', [], { members: 0, voters: 0, learners: 0 }],
    ['three voters', [etcd0, etcd1, etcd4], { members: 3, voters: 3, learners: 0 }],
    ['voters, a learner and an unstarted learner', MEMBERS, { members: 5, voters: 3, learners: 2 }],
  ])('when the cluster has %s, then the summary counts them', (_when, members, counts) => {
    expect(summarizeCluster('cdf818194e3a8c32', members)).toEqual({ id: 'cdf818194e3a8c32', ...counts });
  });

  it.each<[string, Member, string]>([
    ['a started voter', etcd0, 'voter'],
    ['a started learner', learner2, 'learner'],
    ['an unstarted learner', unstarted3, 'unstarted'],
    ['an unstarted voter', member('5', '', ['http://x:2380'], false), 'unstarted'],
  ])('when the member is %s, then its phase is %s', (_when, m, phase) => {
    expect(memberPhase(m)).toBe(phase);
  });
});

describe('describeMember', () => {
  it.each<[string, Member, string]>([
    ['a started member', member('91bc3c398fb3c146', 'etcd-1', ['http://etcd-1:2380']), 'etcd-1 (91bc3c398fb3c146)'],
    ['an unstarted member', member('628170c800dbcee', '', ['http://etcd-3:2380']), 'unstarted http://etcd-3:2380 (628170c800dbcee)'],
    ['an unstarted member without peer URLs', member('1', '', []), 'unstarted (none) (1)'],
  ])('when it describes %s, then every message names it as %j', (_what, m, text) => {
    expect(describeMember(m)).toBe(text);
  });
});

describe('wantedMember', () => {
  const template = { peerUrlTemplate: 'http://{name}.etcd-headless:2380' };
  it.each<[string, { peerUrlTemplate?: string }, { id?: string; name?: string; peerURLs?: string[] }, MatchWanted]>([
    ['an id, whatever else is sent', template, { id: 'a1', name: 'etcd-1', peerURLs: ['http://x:2380'] }, { id: 'a1', peerURLs: [] }],
    [
      'a name and its own peer URLs',
      template,
      { name: 'etcd-1', peerURLs: ['http://x:2380'] },
      { name: 'etcd-1', peerURLs: ['http://x:2380'] },
    ],
    ['a name, with a template', template, { name: 'etcd-1' }, { name: 'etcd-1', peerURLs: ['http://etcd-1.etcd-headless:2380'] }],
    ['a name, without a template', {}, { name: 'etcd-1' }, { name: 'etcd-1', peerURLs: [] }],
    ['peer URLs alone', {}, { peerURLs: ['http://x:2380'] }, { name: undefined, peerURLs: ['http://x:2380'] }],
  ])('when a request names %s, then the wanted member is as the table says', (_what, config, req, wanted) => {
    expect(wantedMember(config, req)).toEqual(wanted);
  });
});
