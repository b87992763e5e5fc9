/**
 * The agent in the node's network namespace, as a real process over real HTTP:
 * it refuses to start without a token (exit 2, one line naming the variable),
 * and with one, a loopback caller without it is refused (401) — the node's
 * loopback vouches for nobody.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { binCommand } from '../../scripts/bin-command';
import { ChildAgent, MAIN_JS as main } from '../helpers/child-agent';
import { call, CallOptions } from '../helpers/http-call';
import { patience } from '../helpers/eventually';
let dir = '';
const agents: ChildAgent[] = [];

// Nothing listens on port 1: reads answer `unavailable`, and the guard runs before any etcd call.
const BASE = {
  ETCD_AGENT_MEMBER_NAME: 'etcd-0',
  ETCD_AGENT_ENDPOINTS: 'http://127.0.0.1:1',
  ETCD_AGENT_LOCAL_ENDPOINT: 'http://127.0.0.1:1',
};
// An unknown kbagent action is a mutating call (POST) that needs no etcd to answer once past the guard.
const MUTATION: CallOptions = { path: '/v1.0/action', body: { action: 'noSuchAction' } };

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'host-network-test-'));
});

afterAll(async () => {
  await Promise.all(agents.map((a) => a.kill('SIGKILL')));
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs the bin's `serve` (as its first line says, like ChildAgent) to its end with only `env` (and PATH) in its environment. */
function serveToExit(env: Record<string, string>, argv: string[] = []): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const childEnv = { PATH: process.env.PATH, ...env };
    const [node, args] = binCommand(main, ['serve', ...argv]);
    execFile(node, args, { env: childEnv, timeout: 20_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
      if (err !== null && code === null) reject(err);
      else resolve({ code, stdout, stderr });
    });
  });
}

async function start(env: Record<string, string>): Promise<ChildAgent> {
  const agent = await ChildAgent.start(main, { ...BASE, ...env });
  agents.push(agent);
  return agent;
}

describe('a host-network agent without a token', () => {
  // [how it learns it is in the node's network namespace, environment, argv, the reason the line gives]
  it.each<[string, Record<string, string>, string[], string]>([
    ['ETCD_AGENT_HOST_NETWORK=true', { ETCD_AGENT_HOST_NETWORK: 'true' }, [], 'ETCD_AGENT_HOST_NETWORK=true'],
    ['--host-network', {}, ['--host-network'], 'ETCD_AGENT_HOST_NETWORK=true'],
    ['POD_IP equal to HOST_IP', { POD_IP: '10.0.0.5', HOST_IP: '10.0.0.5' }, [], 'POD_IP equals HOST_IP (10.0.0.5)'],
  ])('when told by %s, then it exits 2 with one line naming ETCD_AGENT_TOKEN_FILE', async (_how, env, argv, reason) => {
    const exit = await serveToExit({ ...BASE, ETCD_AGENT_LISTEN: '127.0.0.1:0', ...env }, argv);

    expect(exit.code).toBe(2);
    expect(exit.stdout).toBe('');
    expect(exit.stderr).toBe(
      `etcd-lifecycle-agent serve: invalid configuration: ETCD_AGENT_TOKEN_FILE: is required in the node's network namespace (${reason}), ` +
        'where the loopback is shared by every process on the node; set it, or accept unauthenticated loopback calls with ' +
        'ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK=true\n',
    );
  });

  it('when ETCD_AGENT_HOST_NETWORK=false is contradicted by POD_IP = HOST_IP, then it exits 2 naming ETCD_AGENT_HOST_NETWORK', async () => {
    const exit = await serveToExit({ ...BASE, ETCD_AGENT_HOST_NETWORK: 'false', POD_IP: '10.0.0.5', HOST_IP: '10.0.0.5' });

    expect(exit.code).toBe(2);
    expect(exit.stderr).toMatch(
      /^etcd-lifecycle-agent serve: invalid configuration: ETCD_AGENT_HOST_NETWORK: is false, but POD_IP equals HOST_IP \(10\.0\.0\.5\)[^\n]*\n$/,
    );
  });

  it('when unauthenticated loopback calls are accepted explicitly, then it starts, says so, and takes a loopback call without a token', async () => {
    const agent = await start({ ETCD_AGENT_HOST_NETWORK: 'true', ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK: 'true' });

    expect(agent.lines.find((l) => l.message === 'listening')).toMatchObject({ hostNetwork: true });
    await agent.waitFor((l) => l.level === 'warn' && String(l.message).includes('any process on the node may change membership'));
    const answer = await call(agent.url, MUTATION);
    expect({ status: answer.status, body: answer.json }).toMatchObject({ status: 200, body: { error: 'notDefined' } });
  });
});

describe('a host-network agent with a token', () => {
  let agent: ChildAgent;

  beforeAll(async () => {
    const tokenFile = path.join(dir, 'token');
    fs.writeFileSync(tokenFile, 'host-net-token-51c9\n', { mode: 0o600 });
    // Host network learned from the pod's addresses, as kube-inject wires them.
    agent = await start({ POD_IP: '10.0.0.5', HOST_IP: '10.0.0.5', ETCD_AGENT_TOKEN_FILE: tokenFile });
  }, patience(30_000));

  it('when it starts, then its listening line says host network', () => {
    expect(agent.lines.find((l) => l.message === 'listening')).toMatchObject({ hostNetwork: true });
  });

  it.each<[string, number, Record<string, string>]>([
    ['no Authorization header', 401, {}],
    ['a wrong token', 401, { Authorization: 'Bearer host-net-token-51c8' }],
    ['the token', 200, { Authorization: 'Bearer host-net-token-51c9' }],
  ])('when a loopback caller sends %s, then it answers %p', async (_what, status, headers) => {
    const answer = await call(agent.url, { ...MUTATION, headers, localAddress: '127.0.0.1' });

    expect(answer.status).toBe(status);
    if (status === 401) {
      expect(answer.json).toMatchObject({ error: { code: 'unauthorized', retryable: false } });
      expect(answer.headers['www-authenticate']).toBe('Bearer');
    } else {
      expect(answer.json).toMatchObject({ error: 'notDefined' });
    }
  });

  it('when a loopback caller reads, then no token is needed', async () => {
    const answer = await call(agent.url, { method: 'GET', path: '/readyz' });
    expect({ status: answer.status, body: answer.json }).toEqual({ status: 200, body: { status: 'ok' } });
  });
});

describe('a pod-network agent without a token (the contract default, for contrast)', () => {
  it('when POD_IP differs from HOST_IP, then it starts and a loopback caller needs no token', async () => {
    const agent = await start({ POD_IP: '10.244.1.7', HOST_IP: '10.0.0.5' });

    expect(agent.lines.find((l) => l.message === 'listening')).toMatchObject({ hostNetwork: false });
    const answer = await call(agent.url, MUTATION);
    expect({ status: answer.status, body: answer.json }).toMatchObject({ status: 200, body: { error: 'notDefined' } });
  });
});
