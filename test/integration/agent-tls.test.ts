/**
 * HTTPS and mutual TLS for the agent (docs/api.md §2 `ETCD_AGENT_TLS_*`) over real
 * connections: what a client sees, who is refused at the handshake, and a
 * certificate rotation picked up without a restart.
 */
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { startAgent, RunningAgent } from '../../agent/agent';
import { loadConfig } from '../../agent/config/config';
import { createLogger } from '../../agent/observability/logger';
import { createPki, KeyPair, TestPki } from '../helpers/certs';
import { call } from '../helpers/http-call';
import { eventually, patience } from '../helpers/eventually';
import { captureLogs } from '../helpers/log-capture';

let pki: TestPki;
const running: RunningAgent[] = [];

beforeAll(async () => {
  pki = await createPki();
}, patience(30_000));
afterAll(async () => {
  await Promise.all(running.map((a) => a.stop(2000)));
  await pki?.cleanup();
});

async function start(env: Record<string, string>): Promise<{ agent: RunningAgent; logs: () => string }> {
  const { stream, text } = captureLogs();
  const { config } = loadConfig({
    ETCD_AGENT_LISTEN: '127.0.0.1:0',
    ETCD_AGENT_MEMBER_NAME: 'tls-test',
    ETCD_AGENT_ENDPOINTS: 'http://127.0.0.1:1',
    ETCD_AGENT_LOCAL_ENDPOINT: 'http://127.0.0.1:1',
    ...env,
  });
  const agent = await startAgent(config, {
    logger: createLogger({ stream, level: 'debug' }),
    listen: { tlsReloadIntervalMs: 100 },
  });
  running.push(agent);
  return { agent, logs: text };
}

/** Opens a TLS connection and answers the fingerprint of the certificate the server showed. */
function servedFingerprint(url: string, client: Partial<KeyPair> & { ca: string }): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tls.connect(
      {
        host: hostname,
        port: Number(port),
        ca: fs.readFileSync(client.ca),
        cert: client.cert ? fs.readFileSync(client.cert) : undefined,
        key: client.key ? fs.readFileSync(client.key) : undefined,
      },
      () => {
        const fingerprint = socket.getPeerCertificate().fingerprint256;
        socket.end();
        resolve(fingerprint);
      },
    );
    socket.on('error', reject);
  });
}

const fingerprintOf = (certFile: string): string => new X509Certificate(fs.readFileSync(certFile)).fingerprint256;

describe('when ETCD_AGENT_TLS_CERT_FILE and _KEY_FILE are set', () => {
  let agent: RunningAgent;
  beforeAll(async () => {
    ({ agent } = await start({ ETCD_AGENT_TLS_CERT_FILE: pki.server.cert, ETCD_AGENT_TLS_KEY_FILE: pki.server.key }));
  });

  it('then the agent serves HTTPS and its url says https://', async () => {
    expect(agent.listening.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const answer = await call(agent.listening.url, { path: '/livez', tls: { ca: pki.ca.cert } });
    expect(answer).toMatchObject({ status: 200, json: { status: 'ok' } });
  });

  it('when a client does not trust the agent CA, then the client refuses the agent', async () => {
    await expect(call(agent.listening.url, { path: '/livez', tls: { ca: pki.rogueCa.cert } })).rejects.toThrow(
      /self.signed|unable to verify|certificate/i,
    );
  });

  it('when a client speaks plain HTTP to it, then it gets no answer', async () => {
    await expect(call(agent.listening.url.replace('https:', 'http:'), { path: '/livez', timeoutMs: 3000 })).rejects.toThrow();
  });

  it('when no client CA is set, then a client without a certificate is served', async () => {
    const answer = await call(agent.listening.url, { path: '/readyz', tls: { ca: pki.ca.cert } });
    expect(answer.status).toBe(200);
  });
});

describe('when ETCD_AGENT_TLS_CLIENT_CA_FILE is set (mutual TLS)', () => {
  let agent: RunningAgent;
  let logs: () => string;
  beforeAll(async () => {
    ({ agent, logs } = await start({
      ETCD_AGENT_TLS_CERT_FILE: pki.server.cert,
      ETCD_AGENT_TLS_KEY_FILE: pki.server.key,
      ETCD_AGENT_TLS_CLIENT_CA_FILE: pki.ca.cert,
    }));
  });

  it('when a client shows no certificate, then it is refused at the handshake', async () => {
    await expect(call(agent.listening.url, { path: '/livez', tls: { ca: pki.ca.cert } })).rejects.toThrow(
      /certificate required|ECONNRESET|socket hang up|handshake/i,
    );
  });

  it('when a client shows a certificate of another CA, then it is refused at the handshake', async () => {
    await expect(call(agent.listening.url, { path: '/livez', tls: { ca: pki.ca.cert, ...pki.rogueClient } })).rejects.toThrow(
      /unknown ca|ECONNRESET|socket hang up|handshake|certificate/i,
    );
  });

  it('when a client shows a certificate of the client CA, then reads and (from loopback) mutations are served', async () => {
    const livez = await call(agent.listening.url, { path: '/livez', tls: { ca: pki.ca.cert, ...pki.client } });
    expect(livez.status).toBe(200);
    const mutation = await call(agent.listening.url, {
      path: '/v1.0/action',
      body: { action: 'noSuchAction' },
      tls: { ca: pki.ca.cert, ...pki.client },
    });
    expect([401, 403]).not.toContain(mutation.status);
  });

  it('then the refused handshakes were logged without any key material', () => {
    expect(logs()).toContain('tls handshake refused');
    expect(logs()).not.toMatch(/PRIVATE KEY/);
  });
});

describe('when the certificate files change', () => {
  it('when the pair is rewritten in place, then new connections get the new certificate without a restart', async () => {
    const dir = fs.mkdtempSync(path.join(pki.dir, 'inplace-'));
    const pair = await pki.ca.issue('rotating', { into: { cert: path.join(dir, 'tls.crt'), key: path.join(dir, 'tls.key') } });
    const { agent, logs } = await start({ ETCD_AGENT_TLS_CERT_FILE: pair.cert, ETCD_AGENT_TLS_KEY_FILE: pair.key });
    const before = await servedFingerprint(agent.listening.url, { ca: pki.ca.cert });
    expect(before).toBe(fingerprintOf(pair.cert));

    await pki.ca.issue('rotating', { into: pair });
    const after = fingerprintOf(pair.cert);
    expect(after).not.toBe(before);

    await eventually(async () => expect(await servedFingerprint(agent.listening.url, { ca: pki.ca.cert })).toBe(after), {
      within: 5000,
      every: 50,
    });
    expect(logs()).toContain('tls certificate reloaded');
  });

  it('when only the certificate has changed so far (half a rotation), then the old pair keeps serving until the key follows', async () => {
    const dir = fs.mkdtempSync(path.join(pki.dir, 'half-'));
    const pair = await pki.ca.issue('half', { into: { cert: path.join(dir, 'tls.crt'), key: path.join(dir, 'tls.key') } });
    const { agent, logs } = await start({ ETCD_AGENT_TLS_CERT_FILE: pair.cert, ETCD_AGENT_TLS_KEY_FILE: pair.key });
    const before = await servedFingerprint(agent.listening.url, { ca: pki.ca.cert });

    const next = await pki.ca.issue('half-next');
    fs.copyFileSync(next.cert, pair.cert);
    await eventually(async () => expect(logs()).toContain('do not load'), { within: 5000, every: 50 });
    expect(await servedFingerprint(agent.listening.url, { ca: pki.ca.cert })).toBe(before);

    fs.copyFileSync(next.key, pair.key);
    await eventually(async () => expect(await servedFingerprint(agent.listening.url, { ca: pki.ca.cert })).toBe(fingerprintOf(next.cert)), {
      within: 5000,
      every: 50,
    });
  });

  it('when a Kubernetes Secret volume rotates by symlink swap (certificate, key and client CA together), then the new ones apply', async () => {
    const root = fs.mkdtempSync(path.join(pki.dir, 'secret-'));
    const version = async (name: string, ca: string): Promise<void> => {
      fs.mkdirSync(path.join(root, name));
      await pki.ca.issue(`${name}-server`, { into: { cert: path.join(root, name, 'tls.crt'), key: path.join(root, name, 'tls.key') } });
      fs.copyFileSync(ca, path.join(root, name, 'ca.crt'));
    };
    await version('..v1', pki.ca.cert);
    fs.symlinkSync('..v1', path.join(root, '..data'));
    for (const f of ['tls.crt', 'tls.key', 'ca.crt']) fs.symlinkSync(path.join('..data', f), path.join(root, f));
    const { agent } = await start({
      ETCD_AGENT_TLS_CERT_FILE: path.join(root, 'tls.crt'),
      ETCD_AGENT_TLS_KEY_FILE: path.join(root, 'tls.key'),
      ETCD_AGENT_TLS_CLIENT_CA_FILE: path.join(root, 'ca.crt'),
    });
    expect((await call(agent.listening.url, { path: '/livez', tls: { ca: pki.ca.cert, ...pki.client } })).status).toBe(200);

    // The new version trusts only the rogue CA's clients.
    await version('..v2', pki.rogueCa.cert);
    fs.symlinkSync('..v2', path.join(root, '..data_tmp'));
    fs.renameSync(path.join(root, '..data_tmp'), path.join(root, '..data'));
    fs.rmSync(path.join(root, '..v1'), { recursive: true });

    await eventually(
      async () =>
        expect((await call(agent.listening.url, { path: '/livez', tls: { ca: pki.ca.cert, ...pki.rogueClient } })).status).toBe(200),
      { within: 5000, every: 50 },
    );
    await expect(call(agent.listening.url, { path: '/livez', tls: { ca: pki.ca.cert, ...pki.client } })).rejects.toThrow();
    expect(await servedFingerprint(agent.listening.url, { ca: pki.ca.cert, ...pki.rogueClient })).toBe(
      fingerprintOf(path.join(root, '..v2', 'tls.crt')),
    );
  });

  it('when the agent stops, then the certificate poller stops with it', async () => {
    const dir = fs.mkdtempSync(path.join(pki.dir, 'stop-'));
    const pair = await pki.ca.issue('stopping', { into: { cert: path.join(dir, 'tls.crt'), key: path.join(dir, 'tls.key') } });
    const { agent, logs } = await start({ ETCD_AGENT_TLS_CERT_FILE: pair.cert, ETCD_AGENT_TLS_KEY_FILE: pair.key });
    // A witness on the same files, still running: its reload says when a poller that still ran would have reloaded.
    const witness = await start({ ETCD_AGENT_TLS_CERT_FILE: pair.cert, ETCD_AGENT_TLS_KEY_FILE: pair.key });
    await agent.stop(2000);

    await pki.ca.issue('stopping', { into: pair });
    await eventually(async () => expect(witness.logs()).toContain('tls certificate reloaded'), { within: 10_000, every: 50 });

    expect(logs()).not.toContain('tls certificate reloaded');
    await witness.agent.stop(2000);
  });
});
