import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { authorizeMutation, AuthOptions, isLoopback, mutationAuthWarnings, MutationPolicy, TokenSource } from '../../agent/server/auth';
import { startupAuthRefusal, type StartupAuthSettings } from '../../agent/config/host-network';

const digest = (token: string): Buffer => createHash('sha256').update(token).digest();

describe('isLoopback', () => {
  it.each([
    ['127.0.0.1', true],
    ['127.0.0.2', true],
    ['127.255.255.254', true],
    ['::1', true],
    ['::ffff:127.0.0.1', true],
    ['::FFFF:127.0.0.9', true],
    ['192.0.2.2', false],
    ['10.0.0.1', false],
    ['::ffff:10.0.0.1', false],
    ['fd00::2', false],
    ['::', false],
    ['0.0.0.0', false],
    ['128.0.0.1', false],
    ['1127.0.0.1', false],
    ['127.0.0.1.evil', false],
    ['', false],
    [undefined, false],
  ])('when the peer is %p, then loopback is %p', (address, expected) => {
    expect(isLoopback(address)).toBe(expected);
  });
});

describe('authorizeMutation (docs/api.md §6)', () => {
  const withToken: MutationPolicy = { tokenConfigured: true, tokenDigest: digest('s3cret'), allowRemoteUnauthenticated: false };
  const tokenUnreadable: MutationPolicy = { tokenConfigured: true, tokenDigest: undefined, allowRemoteUnauthenticated: false };
  const noToken: MutationPolicy = { tokenConfigured: false, allowRemoteUnauthenticated: false };
  const openToAll: MutationPolicy = { tokenConfigured: false, allowRemoteUnauthenticated: true };
  const tokenAndOpen: MutationPolicy = { tokenConfigured: true, tokenDigest: digest('s3cret'), allowRemoteUnauthenticated: true };

  it.each<[string, MutationPolicy, string | undefined, string, string | undefined]>([
    ['token set, right token, remote', withToken, 'Bearer s3cret', '192.0.2.2', undefined],
    ['token set, right token, loopback', withToken, 'Bearer s3cret', '127.0.0.1', undefined],
    ['token set, scheme in lower case', withToken, 'bearer s3cret', '192.0.2.2', undefined],
    ['token set, no header, loopback', withToken, undefined, '127.0.0.1', 'unauthorized'],
    ['token set, no header, remote', withToken, undefined, '192.0.2.2', 'unauthorized'],
    ['token set, wrong token', withToken, 'Bearer s3cres', '127.0.0.1', 'unauthorized'],
    ['token set, token with a suffix', withToken, 'Bearer s3cretX', '127.0.0.1', 'unauthorized'],
    ['token set, prefix of the token', withToken, 'Bearer s3cre', '127.0.0.1', 'unauthorized'],
    ['token set, Basic scheme', withToken, 'Basic s3cret', '127.0.0.1', 'unauthorized'],
    ['token set, bare token', withToken, 's3cret', '127.0.0.1', 'unauthorized'],
    ['token set, empty bearer', withToken, 'Bearer ', '127.0.0.1', 'unauthorized'],
    ['token set, file unreadable', tokenUnreadable, 'Bearer s3cret', '127.0.0.1', 'unauthorized'],
    ['token set and remote allowed, no header', tokenAndOpen, undefined, '192.0.2.2', undefined],
    ['token set and remote allowed, wrong token', tokenAndOpen, 'Bearer nope', '192.0.2.2', undefined],
    ['token set and remote allowed, right token', tokenAndOpen, 'Bearer s3cret', '192.0.2.2', undefined],
    ['no token, loopback v4', noToken, undefined, '127.0.0.1', undefined],
    ['no token, loopback 127.0.0.2', noToken, undefined, '127.0.0.2', undefined],
    ['no token, loopback v6', noToken, undefined, '::1', undefined],
    ['no token, v4-mapped loopback', noToken, undefined, '::ffff:127.0.0.1', undefined],
    ['no token, remote', noToken, undefined, '192.0.2.2', 'forbidden'],
    ['no token, remote with a bearer header', noToken, 'Bearer anything', '192.0.2.2', 'forbidden'],
    ['no token, unknown peer', noToken, undefined, undefined as unknown as string, 'forbidden'],
    ['no token, remote allowed', openToAll, undefined, '192.0.2.2', undefined],
  ])('when %s, then %p', (_case, policy, authorization, remoteAddress, expected) => {
    const refusal = authorizeMutation(policy, { authorization, remoteAddress });
    expect(refusal?.code).toBe(expected);
    if (refusal !== undefined) {
      expect(refusal.status).toBe(expected === 'unauthorized' ? 401 : 403);
      expect(refusal.retryable).toBe(false);
      expect(refusal.message).not.toContain('s3cret');
    }
  });
});

describe("authorizeMutation in the node's network namespace (host network)", () => {
  const base = { tokenDigest: digest('s3cret'), allowRemoteUnauthenticated: false, hostNetwork: true };
  const hostToken: MutationPolicy = { ...base, tokenConfigured: true };
  const hostNoToken: MutationPolicy = { ...base, tokenConfigured: false, tokenDigest: undefined };
  const hostOptOut: MutationPolicy = { ...hostNoToken, hostNetworkAllowUnauthenticatedLoopback: true };
  const hostTokenOptOut: MutationPolicy = { ...hostToken, hostNetworkAllowUnauthenticatedLoopback: true };
  const hostOpenToAll: MutationPolicy = { ...hostNoToken, allowRemoteUnauthenticated: true };
  const podOptOut: MutationPolicy = {
    tokenConfigured: false,
    allowRemoteUnauthenticated: false,
    hostNetwork: false,
    hostNetworkAllowUnauthenticatedLoopback: true,
  };

  // [case, expected refusal code, policy, Authorization header, peer address]
  it.each<[string, string | undefined, MutationPolicy, string | undefined, string]>([
    ['token set, no header, loopback', 'unauthorized', hostToken, undefined, '127.0.0.1'],
    ['token set, no header, v6 loopback', 'unauthorized', hostToken, undefined, '::1'],
    ['token set, wrong token, loopback', 'unauthorized', hostToken, 'Bearer nope', '127.0.0.1'],
    ['token set, right token, loopback', undefined, hostToken, 'Bearer s3cret', '127.0.0.1'],
    ['token set, right token, remote', undefined, hostToken, 'Bearer s3cret', '192.0.2.2'],
    ['token set, no header, remote', 'unauthorized', hostToken, undefined, '192.0.2.2'],
    ['no token, loopback', 'forbidden', hostNoToken, undefined, '127.0.0.1'],
    ['no token, 127.0.0.2', 'forbidden', hostNoToken, undefined, '127.0.0.2'],
    ['no token, v4-mapped loopback', 'forbidden', hostNoToken, undefined, '::ffff:127.0.0.1'],
    ['no token, remote', 'forbidden', hostNoToken, undefined, '192.0.2.2'],
    ['no token, loopback allowed explicitly, loopback', undefined, hostOptOut, undefined, '127.0.0.1'],
    ['no token, loopback allowed explicitly, remote', 'forbidden', hostOptOut, undefined, '192.0.2.2'],
    ['token set and loopback allowed explicitly, no header, loopback', 'unauthorized', hostTokenOptOut, undefined, '127.0.0.1'],
    ['no token, remote allowed, remote', undefined, hostOpenToAll, undefined, '192.0.2.2'],
    ['no token, remote allowed, loopback', undefined, hostOpenToAll, undefined, '127.0.0.1'],
    ['pod network, loopback opt-out set, loopback', undefined, podOptOut, undefined, '127.0.0.1'],
    ['pod network, loopback opt-out set, remote', 'forbidden', podOptOut, undefined, '192.0.2.2'],
  ])('when %s, then %p', (_case, expected, policy, authorization, remoteAddress) => {
    const refusal = authorizeMutation(policy, { authorization, remoteAddress });
    expect(refusal?.code).toBe(expected);
    if (refusal !== undefined) expect(refusal.status).toBe(expected === 'unauthorized' ? 401 : 403);
    if (expected === 'forbidden' && policy.hostNetworkAllowUnauthenticatedLoopback !== true) {
      expect(refusal?.message).toContain("node's network namespace");
    }
  });
});

describe('startupAuthRefusal', () => {
  const none: StartupAuthSettings = {
    tokenConfigured: false,
    allowRemoteUnauthenticated: false,
    hostNetwork: false,
    hostNetworkAllowUnauthenticatedLoopback: false,
  };

  // [case, the variable the refusal names (undefined: it may start), settings]
  it.each<[string, string | undefined, Partial<StartupAuthSettings>]>([
    ['pod network, no token', undefined, {}],
    ['pod network, token', undefined, { tokenConfigured: true }],
    ['host network, token', undefined, { hostNetwork: true, tokenConfigured: true }],
    ['host network, no token', 'ETCD_AGENT_TOKEN_FILE', { hostNetwork: true }],
    [
      'host network, no token, loopback allowed explicitly',
      undefined,
      { hostNetwork: true, hostNetworkAllowUnauthenticatedLoopback: true },
    ],
    [
      'host network, no token, remote allowed (which includes loopback)',
      undefined,
      { hostNetwork: true, allowRemoteUnauthenticated: true },
    ],
    [
      'host network, token and loopback allowed',
      undefined,
      { hostNetwork: true, tokenConfigured: true, hostNetworkAllowUnauthenticatedLoopback: true },
    ],
  ])('when %s, then the refusal names %p', (_case, variable, settings) => {
    const refusal = startupAuthRefusal({ ...none, ...settings, hostNetworkReason: 'ETCD_AGENT_HOST_NETWORK=true' });
    expect(refusal?.variable).toBe(variable);
    if (refusal !== undefined) {
      // One line, saying why and the two ways out.
      expect(refusal.message).not.toContain('\n');
      expect(refusal.message).toContain("node's network namespace (ETCD_AGENT_HOST_NETWORK=true)");
      expect(refusal.message).toContain('ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK=true');
    }
  });
});

describe('TokenSource', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'token-source-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('when the file ends with a newline, then the newline is not part of the token', () => {
    const file = path.join(dir, 'token');
    fs.writeFileSync(file, 'abc\n');
    expect(new TokenSource(file).digest()).toEqual(digest('abc'));
  });

  it('when the file is rewritten in place, then the next call sees the new token', () => {
    const file = path.join(dir, 'token');
    fs.writeFileSync(file, 'first');
    const source = new TokenSource(file);
    expect(source.digest()).toEqual(digest('first'));
    fs.writeFileSync(file, 'other'); // same size: only the times tell
    expect(source.digest()).toEqual(digest('other'));
  });

  it('when the file is empty or missing, then there is no token (every call is refused)', () => {
    const file = path.join(dir, 'token');
    fs.writeFileSync(file, '\n');
    const source = new TokenSource(file);
    expect(source.digest()).toBeUndefined();
    fs.rmSync(file);
    expect(source.digest()).toBeUndefined();
    fs.writeFileSync(file, 'back');
    expect(source.digest()).toEqual(digest('back'));
  });
});

describe('mutationAuthWarnings (what a start warns about)', () => {
  // [settings, the warnings, by the variable each names]
  it.each<[string, AuthOptions, string[]]>([
    ['no token, pod network', { allowRemoteUnauthenticated: false }, []],
    ['a token', { tokenFile: '/t', allowRemoteUnauthenticated: false }, []],
    ['a token and the remote opt-out', { tokenFile: '/t', allowRemoteUnauthenticated: true }, ['ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED']],
    ['the remote opt-out alone', { allowRemoteUnauthenticated: true }, []],
    [
      'host network, no token, loopback opt-out',
      { allowRemoteUnauthenticated: false, hostNetwork: true, hostNetworkAllowUnauthenticatedLoopback: true },
      ['ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK'],
    ],
    [
      'host network, a token, loopback opt-out',
      { tokenFile: '/t', allowRemoteUnauthenticated: false, hostNetwork: true, hostNetworkAllowUnauthenticatedLoopback: true },
      [],
    ],
    [
      'pod network, loopback opt-out',
      { allowRemoteUnauthenticated: false, hostNetwork: false, hostNetworkAllowUnauthenticatedLoopback: true },
      [],
    ],
  ])('when %s, then the start warns about %j', (_case, options, variables) => {
    const warnings = mutationAuthWarnings(options);
    expect(warnings.map((w) => w.split('=')[0])).toEqual(variables);
  });
});
