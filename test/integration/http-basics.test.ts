import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { RunningAgent, startAgent } from '../../agent/agent';
import { loadConfig } from '../../agent/config/config';
import { createLogger } from '../../agent/observability/logger';
import { createMetrics } from '../../agent/observability/metrics';
import { Answer, parseJson } from '../helpers/http-call';

// The agent serves before etcd is reachable (docs/api.md §2): port 1 refuses, so nothing here needs etcd.
const UNREACHABLE = 'http://127.0.0.1:1';
const JOIN = '/v1/members/join';

interface Call {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Send the body chunked, without Content-Length. */
  chunked?: boolean;
}

/** One request on a fresh connection; resolves with the answer even when the server stops reading the body early. */
function call(url: string, { method = 'GET', headers = {}, body, chunked = false }: Call = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const all = { ...headers };
    if (body !== undefined && !chunked) all['Content-Length'] = String(Buffer.byteLength(body));
    const req = http.request(url, { method, headers: all, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: parseJson(text) }));
      res.on('error', reject);
    });
    let answered = false;
    req.on('response', () => (answered = true));
    // A server that answers 413 may close before the whole body is written; the answer is what counts.
    req.on('error', (err) => (answered ? undefined : reject(err)));
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer from ${method} ${url} within 10 s`)));
    if (body !== undefined) req.write(body);
    req.end();
  });
}

const json = { 'Content-Type': 'application/json' };

function post(body: string, headers: Record<string, string> = json, chunked = false): Call {
  return { method: 'POST', headers, body, chunked };
}

const started: RunningAgent[] = [];
let tmp = '';

/** Starts an agent of its own (own app, own metrics registry) on a free loopback port. */
async function start(env: Record<string, string> = {}): Promise<RunningAgent> {
  const { config } = loadConfig({
    ETCD_AGENT_LISTEN: '127.0.0.1:0',
    ETCD_AGENT_ENDPOINTS: UNREACHABLE,
    ETCD_AGENT_LOCAL_ENDPOINT: UNREACHABLE,
    ETCD_AGENT_MEMBER_NAME: 'etcd-0',
    ...env,
  });
  const agent = await startAgent(config, { logger: createLogger({ silent: true }), metrics: createMetrics() });
  started.push(agent);
  return agent;
}

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-http-test-'));
});

afterEach(async () => {
  await Promise.all(started.splice(0).map((agent) => agent.stop(2000)));
});

afterAll(() => {
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** The contract's error envelope: the request id of the answer, the code's status and retryability. */
function expectError(reply: Answer, status: number, code: string, message: RegExp): void {
  expect(reply.status).toBe(status);
  expect(reply.headers['content-type']).toMatch(/^application\/json/);
  expect(reply.json).toEqual({
    requestId: reply.headers['x-request-id'],
    error: { code, message: expect.stringMatching(message), retryable: false },
  });
  expect(reply.json.requestId).toMatch(/^[0-9a-f-]{36}$/);
}

describe('process routes', () => {
  it.each([['/livez'], ['/readyz']])('when %s is asked while etcd is unreachable, then it answers 200 {"status":"ok"}', async (route) => {
    const agent = await start();

    const reply = await call(`${agent.listening.url}${route}`);

    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toMatch(/^application\/json/);
    expect(reply.json).toEqual({ status: 'ok' });
  });

  it('when /metrics is asked, then it serves prom-client text with the agent and process metrics', async () => {
    const agent = await start();

    const reply = await call(`${agent.listening.url}/metrics`);

    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    for (const name of [
      'etcd_agent_membership_changes_total counter',
      'etcd_agent_actions_total counter',
      'etcd_agent_action_duration_seconds histogram',
      'etcd_agent_cluster_healthy gauge',
      'etcd_agent_quorum_healthy_voters gauge',
      'etcd_agent_quorum_voters gauge',
      'etcd_agent_health_observation_age_seconds gauge',
      'etcd_agent_cluster_status gauge',
      'etcd_agent_http_request_duration_seconds histogram',
      'etcd_agent_build_info gauge',
      'process_cpu_user_seconds_total counter',
    ]) {
      expect(reply.text).toContain(`# TYPE ${name}\n`);
    }
    const { version } = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string };
    expect(reply.text).toContain(`etcd_agent_build_info{version="${version}",node_version="${process.version}"} 1\n`);
  });

  it('when two agents run in one process, then each counts only its own requests', async () => {
    const first = await start();
    const second = await start();
    await call(`${first.listening.url}/livez`);
    await call(`${first.listening.url}/livez`);
    await call(`${second.listening.url}/nope`);

    const [a, b] = await Promise.all([call(`${first.listening.url}/metrics`), call(`${second.listening.url}/metrics`)]);

    expect(a.text).toContain('etcd_agent_http_requests_total{method="GET",route="/livez",code="200"} 2\n');
    expect(a.text).toContain('etcd_agent_http_request_duration_seconds_count{method="GET",route="/livez",code="200"} 2\n');
    expect(a.text).not.toContain('route="unmatched"');
    expect(b.text).toContain('etcd_agent_http_requests_total{method="GET",route="unmatched",code="404"} 1\n');
    expect(b.text).not.toContain('route="/livez"');
  });
});

describe('errors as the contract envelope', () => {
  const big = JSON.stringify({ name: 'etcd-3', pad: 'x'.repeat(100 * 1024) });
  // [situation, HTTP, code, route, request, message]
  it.each<[string, number, string, string, Call, RegExp]>([
    ['an unknown route is asked', 404, 'not-found', '/no/such/route', {}, /^no route GET \/no\/such\/route$/],
    ['an unknown route is posted to', 404, 'not-found', '/v1/nothing', post('{}'), /^no route POST \/v1\/nothing$/],
    ['GET is sent to a POST route', 405, 'method-not-allowed', JOIN, {}, /GET is not allowed on \/v1\/members\/join/],
    ['POST is sent to a GET route', 405, 'method-not-allowed', '/livez', post('{}'), /POST is not allowed on \/livez/],
    ['a 100 KiB JSON body is posted', 413, 'payload-too-large', JOIN, post(big), /64 KiB/],
    ['a 100 KiB JSON body is posted chunked', 413, 'payload-too-large', JOIN, post(big, json, true), /64 KiB/],
    ['malformed JSON is posted', 400, 'bad-request', JOIN, post('{"name": "etcd-3",'), /not valid JSON/],
    ['a JSON string is posted', 400, 'bad-request', JOIN, post('"etcd-3"'), /not valid JSON/],
    ['a JSON array is posted', 400, 'bad-request', JOIN, post('[{"name":"etcd-3"}]'), /must be a JSON object/],
    ['JSON null is posted', 400, 'bad-request', JOIN, post('null'), /not valid JSON/],
    [
      'a text/plain body is posted',
      415,
      'unsupported-media-type',
      JOIN,
      post('name=etcd-3', { 'Content-Type': 'text/plain' }),
      /application\/json/,
    ],
    [
      'a form body is posted',
      415,
      'unsupported-media-type',
      JOIN,
      post('name=etcd-3', { 'Content-Type': 'application/x-www-form-urlencoded' }),
      /application\/json/,
    ],
    ['a body with no content type is posted', 415, 'unsupported-media-type', JOIN, post('{"name":"etcd-3"}', {}), /application\/json/],
    [
      'a Latin-1 JSON body is posted',
      415,
      'unsupported-media-type',
      JOIN,
      post('{}', { 'Content-Type': 'application/json; charset=latin1' }),
      /UTF-8/,
    ],
  ])('when %s, then it answers %i %s with the envelope', async (_when, status, code, route, request, message) => {
    const agent = await start();

    const reply = await call(`${agent.listening.url}${route}`, request);

    expectError(reply, status, code, message);
  });

  it('when GET is sent to a POST route, then Allow names POST', async () => {
    const agent = await start();

    const reply = await call(`${agent.listening.url}${JOIN}`);

    expect(reply.headers.allow).toBe('POST');
  });

  it('when a body error is answered, then the server keeps serving the next request', async () => {
    const agent = await start();
    await call(`${agent.listening.url}${JOIN}`, post(big));

    const reply = await call(`${agent.listening.url}/livez`);

    expect(reply.status).toBe(200);
  });
});

describe('request ids', () => {
  it.each<[string, string, string, number]>([
    ['an error', '/no/such/route', 'GET', 404],
    ['a body error', JOIN, 'POST', 400],
    ['a success', '/readyz', 'GET', 200],
  ])('when %s answers a call carrying X-Request-Id, then the header echoes it', async (_what, route, method, status) => {
    const agent = await start();

    const reply = await call(`${agent.listening.url}${route}`, {
      method,
      headers: { 'X-Request-Id': 'ctl-7f3a.join:1', 'Content-Type': 'application/json' },
      body: method === 'POST' ? '{' : undefined,
    });

    expect(reply.status).toBe(status);
    expect(reply.headers['x-request-id']).toBe('ctl-7f3a.join:1');
    if (status !== 200) expect(reply.json.requestId).toBe('ctl-7f3a.join:1');
  });

  it.each([
    ['has spaces', 'has spaces in it'],
    ['is 129 characters long', 'x'.repeat(129)],
    ['has markup', '<script>'],
  ])('when the incoming X-Request-Id %s, then a fresh UUID replaces it', async (_what, id) => {
    const agent = await start();

    const reply = await call(`${agent.listening.url}/nope`, { headers: { 'X-Request-Id': id } });

    expect(reply.headers['x-request-id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(reply.json.requestId).toBe(reply.headers['x-request-id']);
  });

  it('when two calls carry no id, then each gets its own', async () => {
    const agent = await start();

    const [a, b] = await Promise.all([call(`${agent.listening.url}/nope`), call(`${agent.listening.url}/nope`)]);

    expect(a.json.requestId).not.toBe(b.json.requestId);
  });
});

/** A non-loopback address of this host, to call the agent as a remote caller would; undefined when there is none. */
function externalAddress(): string | undefined {
  return Object.values(os.networkInterfaces())
    .flat()
    .find((i) => i !== undefined && !i.internal && i.family === 'IPv4')?.address;
}

describe('who may post (docs/api.md §6)', () => {
  const body = post('{"name":"etcd-3"}');

  it('when no token file is set and the POST comes from loopback, then auth lets it through', async () => {
    const agent = await start();

    const reply = await call(`${agent.listening.url}${JOIN}`, body);

    expect([401, 403]).not.toContain(reply.status);
    expect(reply.json.requestId).toBe(reply.headers['x-request-id']);
  });

  it.each<[string, number | 'passes auth', Record<string, string>]>([
    ['no Authorization', 401, {}],
    ['a wrong token', 401, { Authorization: 'Bearer not-the-token' }],
    ['the token without "Bearer "', 401, { Authorization: 's3cret-token' }],
    ['the token', 'passes auth', { Authorization: 'Bearer s3cret-token' }],
  ])('when a token file is set and a loopback POST carries %s, then it answers %s', async (_what, expected, headers) => {
    const tokenFile = path.join(tmp, `token-${Math.random().toString(36).slice(2)}`);
    fs.writeFileSync(tokenFile, 's3cret-token\n');
    const agent = await start({ ETCD_AGENT_TOKEN_FILE: tokenFile });

    const reply = await call(`${agent.listening.url}${JOIN}`, { ...body, headers: { ...body.headers, ...headers } });

    if (expected === 'passes auth') {
      expect([401, 403]).not.toContain(reply.status);
    } else {
      expectError(reply, expected, 'unauthorized', /bearer token/);
    }
  });

  const remote = externalAddress();
  (remote === undefined ? it.skip : it).each<[string, string, number | 'passes auth', Record<string, string>]>([
    ['no token file is set', 'POST', 403, {}],
    ['remote unauthenticated calls are allowed', 'POST', 'passes auth', { ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED: 'true' }],
    ['no token file is set', 'GET', 200, {}],
  ])('when %s and a %s comes from a non-loopback address, then it answers %s', async (_what, method, expected, env) => {
    const agent = await start({ ETCD_AGENT_LISTEN: '0.0.0.0:0', ...env });
    const url = `http://${remote}:${agent.listening.port}`;

    const reply = await call(method === 'GET' ? `${url}/readyz` : `${url}${JOIN}`, method === 'GET' ? {} : body);

    if (expected === 'passes auth') expect([401, 403]).not.toContain(reply.status);
    else if (expected === 200) expect(reply.status).toBe(200);
    else expectError(reply, expected, 'forbidden', /only from loopback/);
  });
});
