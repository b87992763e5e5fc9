/**
 * The decisions of scripts/member-common.sh (peer URL scheme, peer host, exit code),
 * each run under bash with the environment of one table row.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';

const COMMON = path.join(__dirname, '..', '..', 'scripts', 'member-common.sh');

/**
 * Runs `call` under bash after sourcing member-common.sh, with only `env` (and PATH) set.
 * `--norc` and no stdin: bash given a socket as stdin and no SHLVL takes itself for a remote shell
 * and reads ~/.bashrc (whatever the machine's user put there: a pyenv rehash waited on its lock).
 */
function bash(call: string, env: Record<string, string>): { code: number; stdout: string } {
  const ran = spawnSync('/bin/bash', ['--norc', '-c', `set -u; . "$1"; ${call}`, 'bash', COMMON], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
  });
  return { code: ran.status ?? -1, stdout: ran.stdout };
}

describe('member-common.sh (sourced by member-join.sh and member-leave.sh)', () => {
  it.each<[string, Record<string, string>, string]>([
    ['nothing is configured', {}, 'http'],
    ['ETCD_PEER_SCHEME is https', { ETCD_PEER_SCHEME: 'https' }, 'https'],
    ['ETCD_PEER_SCHEME is HTTP, whatever TLS_ENABLED says', { ETCD_PEER_SCHEME: 'HTTP', TLS_ENABLED: 'true', PEER_TLS: 'true' }, 'http'],
    ["the addon's TLS is on for peers", { TLS_ENABLED: 'true', PEER_TLS: 'true' }, 'https'],
    ["the addon's TLS is on for clients only", { TLS_ENABLED: 'true', PEER_TLS: 'false' }, 'http'],
    [
      "the addon's TLS is off, whatever the template says",
      { TLS_ENABLED: 'false', PEER_TLS: 'true', ETCD_AGENT_PEER_URL_TEMPLATE: 'https://{name}.x:2380' },
      'http',
    ],
    ['only the template is https', { ETCD_AGENT_PEER_URL_TEMPLATE: 'HTTPS://{name}.x:2380' }, 'https'],
    ['only the template is http', { ETCD_AGENT_PEER_URL_TEMPLATE: 'http://{name}.x:2380' }, 'http'],
  ])('when %s, then peer_scheme prints %s', (_what, env, scheme) => {
    expect(bash('peer_scheme', env)).toEqual({ code: 0, stdout: `${scheme}\n` });
  });

  it('when ETCD_PEER_SCHEME is neither http nor https, then peer_scheme fails and prints nothing', () => {
    expect(bash('peer_scheme', { ETCD_PEER_SCHEME: 'ftp' })).toEqual({ code: 1, stdout: '' });
  });

  it.each<[string, string | undefined, string]>([
    ['no PEER_ENDPOINT', undefined, 'etcd-1.etcd-headless.demo.svc.cluster.local'],
    ['an empty PEER_ENDPOINT', '', 'etcd-1.etcd-headless.demo.svc.cluster.local'],
    ['PEER_ENDPOINT with the pod and an address', 'etcd-0:10.0.0.10,etcd-1:10.0.0.11,etcd-2:10.0.0.12', '10.0.0.11'],
    ['PEER_ENDPOINT with a longer name listed first (no substring match)', 'etcd-10:10.0.0.20,etcd-1:10.0.0.11', '10.0.0.11'],
    ['PEER_ENDPOINT with the bare pod name', 'etcd-0,etcd-1,etcd-2', 'etcd-1'],
    ['PEER_ENDPOINT that does not list the pod', 'etcd-0:10.0.0.10,etcd-10:10.0.0.20', 'etcd-1.etcd-headless.demo.svc.cluster.local'],
    ['PEER_ENDPOINT with a glob character', '*:10.9.9.9,etcd-1:lb.example.com', 'lb.example.com'],
  ])('when there is %s, then peer_host etcd-1 FQDN prints %s', (_what, peerEndpoint, host) => {
    const env: Record<string, string> = peerEndpoint === undefined ? {} : { PEER_ENDPOINT: peerEndpoint };

    expect(bash('peer_host etcd-1 etcd-1.etcd-headless.demo.svc.cluster.local', env)).toEqual({ code: 0, stdout: `${host}\n` });
  });

  it.each<[number, boolean, number]>([
    [0, false, 0],
    [1, false, 1],
    [2, false, 2],
    [3, false, 3],
    [4, false, 4],
    [0, true, 0],
    [1, true, 1],
    [2, true, 1],
    [3, true, 1],
    [4, true, 1],
  ])('when finish %d runs (under kbagent: %p), then the script exits %d', (code, underKbAgent, exit) => {
    const env: Record<string, string> = underKbAgent ? { KB_AGENT_ACTION: '[{"name":"memberJoin"}]' } : {};

    expect(bash(`finish ${code}; echo not reached`, env)).toEqual({ code: exit, stdout: '' });
  });

  it('when sourced by dash (the image may have no bash), then it parses', () => {
    expect(() => execFileSync('/bin/sh', ['-n', COMMON])).not.toThrow();
  });
});
