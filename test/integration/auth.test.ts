/**
 * docs/api.md §6 over real HTTP: who may call a mutating route, with and without
 * a token file, from loopback and from a non-loopback address of this host.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startAgent, RunningAgent } from '../../agent/agent';
import { loadConfig } from '../../agent/config/config';
import { createLogger } from '../../agent/observability/logger';
import { call, Answer, CallOptions } from '../helpers/http-call';
import { captureLogs } from '../helpers/log-capture';

/**
 * A non-loopback address of this machine: an agent bound there and called from
 * here sees a non-loopback peer, while the traffic never leaves the host.
 */
function nonLoopbackAddress(): string | undefined {
  for (const addresses of Object.values(os.networkInterfaces())) {
    for (const a of addresses ?? []) {
      if (!a.internal && a.family === 'IPv4' && !a.address.startsWith('127.') && !a.address.startsWith('169.254.')) {
        return a.address;
      }
    }
  }
  return undefined;
}

const REMOTE = nonLoopbackAddress();
const withRemote = REMOTE === undefined ? it.skip : it;
if (REMOTE === undefined) {
  // The decision itself is covered for any address by test/unit/auth-policy.test.ts.
  process.stderr.write('auth.test: no non-loopback interface address; remote-caller tests are skipped\n');
}

// An unknown kbagent action is a mutating call (POST) that needs no etcd to answer.
const MUTATION: CallOptions = { path: '/v1.0/action', body: { action: 'noSuchAction' } };

interface Started {
  agent: RunningAgent;
  logs: () => string;
}

const running: RunningAgent[] = [];
let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'auth-test-'));
});
afterAll(async () => {
  await Promise.all(running.map((a) => a.stop(2000)));
  fs.rmSync(dir, { recursive: true, force: true });
});

async function start(env: Record<string, string>, host = '127.0.0.1'): Promise<Started> {
  const { stream, text } = captureLogs();
  const { config } = loadConfig({
    ETCD_AGENT_LISTEN: host.includes(':') ? `[${host}]:0` : `${host}:0`,
    ETCD_AGENT_MEMBER_NAME: 'auth-test',
    // Nothing listens on port 1: reads answer `unavailable`, which is still an answer.
    ETCD_AGENT_ENDPOINTS: 'http://127.0.0.1:1',
    ETCD_AGENT_LOCAL_ENDPOINT: 'http://127.0.0.1:1',
    ETCD_AGENT_LOG_LEVEL: 'debug',
    ...env,
  });
  const agent = await startAgent(config, { logger: createLogger({ stream, level: 'debug' }) });
  running.push(agent);
  return { agent, logs: text };
}

function expectRefused(answer: Answer, code: 'unauthorized' | 'forbidden'): void {
  expect(answer.status).toBe(code === 'unauthorized' ? 401 : 403);
  expect(answer.json).toMatchObject({ requestId: expect.any(String), error: { code, retryable: false, message: expect.any(String) } });
}

function expectAccepted(answer: Answer): void {
  // Past the guard the route itself answers: for an unknown kbagent action, 200 notDefined (docs/api.md §5).
  expect(answer.status).toBe(200);
  expect(answer.json).toMatchObject({ error: 'notDefined' });
}

const bearer = (token: string): Record<string, string> => ({ Authorization: `Bearer ${token}` });

/** Writes a Secret volume as the kubelet does: a timestamped dir, `..data` → it, `token` → `..data/token`. */
function secretVolume(root: string, token: string): { file: string; rotate: (token: string) => void } {
  fs.mkdirSync(root);
  let version = 0;
  const writeVersion = (value: string): string => {
    version += 1;
    const name = `..2026_11_29_12_00_0${version}.${process.pid}`;
    fs.mkdirSync(path.join(root, name));
    fs.writeFileSync(path.join(root, name, 'token'), `${value}\n`, { mode: 0o600 });
    return name;
  };
  const first = writeVersion(token);
  fs.symlinkSync(first, path.join(root, '..data'));
  fs.symlinkSync(path.join('..data', 'token'), path.join(root, 'token'));
  let current = first;
  return {
    file: path.join(root, 'token'),
    rotate: (next) => {
      const name = writeVersion(next);
      // The kubelet's AtomicWriter: a new symlink renamed over `..data`, then the old dir removed.
      fs.symlinkSync(name, path.join(root, '..data_tmp'));
      fs.renameSync(path.join(root, '..data_tmp'), path.join(root, '..data'));
      fs.rmSync(path.join(root, current), { recursive: true });
      current = name;
    },
  };
}

describe('when ETCD_AGENT_TOKEN_FILE is set', () => {
  let started: Started;
  let plainFile: string;
  const tokens = ['tok-first-8f3a', 'tok-rewritten-19c2', 'tok-swapped-77d0'];

  beforeAll(async () => {
    plainFile = path.join(dir, 'token');
    fs.writeFileSync(plainFile, `${tokens[0]}\n`);
    started = await start({ ETCD_AGENT_TOKEN_FILE: plainFile });
  });

  it('when a mutating call carries no token, then it is refused with 401 unauthorized and WWW-Authenticate: Bearer', async () => {
    const answer = await call(started.agent.listening.url, MUTATION);
    expectRefused(answer, 'unauthorized');
    expect(answer.headers['www-authenticate']).toBe('Bearer');
  });

  it.each([
    ['a wrong token', bearer('tok-wrong')],
    ['the token followed by more text', bearer(`${tokens[0]} x`)],
    ['a prefix of the token', bearer(tokens[0].slice(0, -1))],
    ['the token under the Basic scheme', { Authorization: `Basic ${tokens[0]}` }],
    ['the bare token', { Authorization: tokens[0] }],
    ['the token in another header', { 'X-Auth-Token': tokens[0] }],
  ])('when a mutating call carries %s, then it is refused with 401', async (_case, headers) => {
    expectRefused(await call(started.agent.listening.url, { ...MUTATION, headers }), 'unauthorized');
  });

  it('when a mutating call carries the right token (the file has a trailing newline), then it is accepted', async () => {
    expectAccepted(await call(started.agent.listening.url, { ...MUTATION, headers: bearer(tokens[0]) }));
    expectAccepted(await call(started.agent.listening.url, { ...MUTATION, headers: { authorization: `bearer ${tokens[0]}` } }));
  });

  it('when the token is wrong, then the answer takes no noticeably different path than a near miss (digests are compared)', async () => {
    // Not a timing proof; a check that wrong tokens of any length are all refused the same way.
    for (const guess of ['', 'x', tokens[0].slice(0, 5), `${tokens[0]}${'y'.repeat(5000)}`]) {
      const answer = await call(started.agent.listening.url, { ...MUTATION, headers: bearer(guess) });
      expect(answer.status).toBe(401);
    }
  });

  it('when reads are made without a token, then they are open', async () => {
    for (const p of ['/livez', '/readyz', '/metrics', '/v1/members', '/v1/health', '/v1/health/local', '/v1/operations']) {
      const answer = await call(started.agent.listening.url, { path: p });
      expect([p, answer.status]).not.toEqual([p, 401]);
      expect([p, answer.status]).not.toEqual([p, 403]);
    }
  });

  it('when the file is rewritten with a new token, then the old one is refused and the new one accepted at once', async () => {
    fs.writeFileSync(plainFile, `${tokens[1]}\n`);
    expectRefused(await call(started.agent.listening.url, { ...MUTATION, headers: bearer(tokens[0]) }), 'unauthorized');
    expectAccepted(await call(started.agent.listening.url, { ...MUTATION, headers: bearer(tokens[1]) }));
  });

  it('when the file disappears, then every mutating call is refused until it is back', async () => {
    fs.rmSync(plainFile);
    expectRefused(await call(started.agent.listening.url, { ...MUTATION, headers: bearer(tokens[1]) }), 'unauthorized');
    fs.writeFileSync(plainFile, `${tokens[1]}\n`);
    expectAccepted(await call(started.agent.listening.url, { ...MUTATION, headers: bearer(tokens[1]) }));
  });

  it('when the file is empty, then no token is accepted, not even an empty one', async () => {
    fs.writeFileSync(plainFile, '\n');
    expectRefused(await call(started.agent.listening.url, { ...MUTATION, headers: { Authorization: 'Bearer ' } }), 'unauthorized');
    expectRefused(await call(started.agent.listening.url, { ...MUTATION, headers: bearer(tokens[1]) }), 'unauthorized');
    fs.writeFileSync(plainFile, `${tokens[1]}\n`);
  });

  it('when the token comes from a Kubernetes Secret volume and the Secret rotates (symlink swap), then the new token is accepted and the old one refused', async () => {
    const volume = secretVolume(path.join(dir, 'secret'), tokens[0]);
    const { agent } = await start({ ETCD_AGENT_TOKEN_FILE: volume.file });
    expectAccepted(await call(agent.listening.url, { ...MUTATION, headers: bearer(tokens[0]) }));

    volume.rotate(tokens[2]);

    expectRefused(await call(agent.listening.url, { ...MUTATION, headers: bearer(tokens[0]) }), 'unauthorized');
    expectAccepted(await call(agent.listening.url, { ...MUTATION, headers: bearer(tokens[2]) }));
  });

  withRemote('when a non-loopback caller brings the right token, then it is accepted; without it, 401 (not 403)', async () => {
    const remote = await start({ ETCD_AGENT_TOKEN_FILE: plainFile }, REMOTE);
    expectAccepted(await call(remote.agent.listening.url, { ...MUTATION, headers: bearer(tokens[1]) }));
    expectRefused(await call(remote.agent.listening.url, MUTATION), 'unauthorized');
    // The agent really saw a non-loopback peer.
    expect(remote.logs()).toContain(`"remote":"${REMOTE}"`);
  });

  it('when the test is over, then no token ever reached the logs', () => {
    const logs = started.logs();
    expect(logs).toContain('"status":401');
    for (const token of tokens) expect(logs).not.toContain(token);
  });
});

describe('when no token file is set', () => {
  let loopback: Started;

  beforeAll(async () => {
    loopback = await start({});
  });

  it.each(['127.0.0.1', '127.0.0.2', '127.1.2.3'])('when a mutating call comes from loopback %s, then it is accepted', async (source) => {
    expectAccepted(await call(loopback.agent.listening.url, { ...MUTATION, localAddress: source }));
    expect(loopback.logs()).toContain(`"remote":"${source}"`);
  });

  it('when a mutating call comes from ::1, then it is accepted', async () => {
    let v6: Started;
    try {
      v6 = await start({}, '::1');
    } catch (err) {
      // No IPv6 loopback on this host; the unit table covers the decision.
      if ((err as NodeJS.ErrnoException).code === 'EADDRNOTAVAIL') return;
      throw err;
    }
    expect(v6.agent.listening.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
    expectAccepted(await call(v6.agent.listening.url, MUTATION));
    expect(v6.logs()).toContain('"remote":"::1"');
  });

  describe('and the caller is not on loopback', () => {
    let remote: Started;
    beforeAll(async () => {
      if (REMOTE !== undefined) remote = await start({}, REMOTE);
    });

    withRemote('when it makes a mutating call, then it is refused with 403 forbidden', async () => {
      const answer = await call(remote.agent.listening.url, MUTATION);
      expectRefused(answer, 'forbidden');
      expect(answer.json.error.message).toContain('ETCD_AGENT_TOKEN_FILE');
      expect(remote.logs()).toContain(`"remote":"${REMOTE}"`);
    });

    withRemote('when it claims to be loopback in forwarding headers, then it is still refused', async () => {
      const headers = { 'X-Forwarded-For': '127.0.0.1', 'X-Real-IP': '127.0.0.1', Forwarded: 'for=127.0.0.1', Host: '127.0.0.1' };
      expectRefused(await call(remote.agent.listening.url, { ...MUTATION, headers }), 'forbidden');
    });

    withRemote('when it sends a token nobody configured, then it is still refused', async () => {
      expectRefused(await call(remote.agent.listening.url, { ...MUTATION, headers: bearer('anything') }), 'forbidden');
    });

    withRemote('when it reads, then the reads are open', async () => {
      const livez = await call(remote.agent.listening.url, { path: '/livez' });
      expect(livez.status).toBe(200);
      const metrics = await call(remote.agent.listening.url, { path: '/metrics' });
      expect(metrics.status).toBe(200);
    });

    withRemote('when the method is not POST, then the guard does not answer for the route (405, not 403)', async () => {
      const answer = await call(remote.agent.listening.url, { method: 'PUT', path: '/v1/members/join', body: {} });
      expect(answer.status).toBe(405);
    });

    withRemote('when ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED=true, then its mutating calls are accepted', async () => {
      const open = await start({ ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED: 'true' }, REMOTE);
      expectAccepted(await call(open.agent.listening.url, MUTATION));
    });
  });
});
