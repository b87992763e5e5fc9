/**
 * Hostile input against a running agent and a real 3-member etcd: hundreds of
 * generated (seeded) malformed requests to every route — bad JSON, wrong types,
 * huge strings, unicode, path tricks, header abuse, broken framing, slow and
 * stalled bodies. Every answer must be a 4xx JSON envelope (POST /v1.0/action:
 * HTTP 200 with a kbagent error, docs/api.md §5), the agent must stay up, no
 * membership RPC may be sent, and the member list must not change.
 *
 * HOSTILE_SEED picks the random part (default 6); a failure prints the seed.
 */
import { gzipSync } from 'node:zlib';
import { Writable } from 'node:stream';
import { RunningAgent, startAgent } from '../../agent/agent';
import { loadConfig } from '../../agent/config/config';
import { createLogger } from '../../agent/observability/logger';
import { CONNECTIONS_CHECK_INTERVAL_MS } from '../../agent/config/timings';
import { createMetrics } from '../../agent/observability/metrics';
import { ERROR_CODES } from '../../agent/proto/errors';
import { ROUTES } from '../../agent/proto/routes';
import { withCluster } from '../helpers/etcd-cluster';
import { patience } from '../helpers/eventually';
import { changesSent } from '../helpers/membership';
import { prng } from '../helpers/prng';
import { rawRequest, RawAnswer, RawPiece } from '../helpers/raw-http';

const SEED = Number(process.env.HOSTILE_SEED ?? 6);
/** How long the agent under test lets a client take to send one request (production: 15 s). */
const REQUEST_TIMEOUT_MS = 2500;
/**
 * By when a request the client never finishes is cut (docs/api.md §2 request timeout): the timeout,
 * Node's check of it every CONNECTIONS_CHECK_INTERVAL_MS, and the answer's way back to this process.
 */
const CUT_BY_MS = REQUEST_TIMEOUT_MS + CONNECTIONS_CHECK_INTERVAL_MS + 2000;
const KBAGENT = '/v1.0/action';

/**
 * How a case's answer is judged: a 4xx with the contract's envelope (or, for
 * POST /v1.0/action, 200 with a kbagent error). Broken framing and stalls too:
 * the agent answers them with the envelope before it closes the connection.
 */
type Expect = 'refused';

interface HostileCase {
  family: string;
  title: string;
  pieces: RawPiece[];
  /** The path and method as the agent will route them (for the kbagent exception). */
  route?: { method: string; path: string };
  expect: Expect;
}

// ---------------------------------------------------------------- request builders

function request(method: string, path: string, headers: Record<string, string | number>, body?: string | Buffer): Buffer {
  const head = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close'];
  for (const [k, v] of Object.entries(headers)) head.push(`${k}: ${v}`);
  if (body !== undefined && !Object.keys(headers).some((k) => /^(content-length|transfer-encoding)$/i.test(k))) {
    head.push(`Content-Length: ${Buffer.byteLength(body)}`);
  }
  return Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`, 'latin1'), body === undefined ? Buffer.alloc(0) : Buffer.from(body)]);
}

const JSON_TYPE = { 'Content-Type': 'application/json' };

function post(
  family: string,
  title: string,
  path: string,
  body: string | Buffer,
  headers: Record<string, string | number> = JSON_TYPE,
): HostileCase {
  return {
    family,
    title,
    pieces: [request('POST', path, headers, body)],
    route: { method: 'POST', path: routeOf(path) },
    expect: 'refused',
  };
}

function postJson(family: string, title: string, path: string, body: unknown): HostileCase {
  return post(family, title, path, JSON.stringify(body));
}

/** The route path Express will match (case-insensitive, one trailing slash ignored, absolute-form allowed). */
function routeOf(path: string): string {
  const pathname = path.startsWith('http') ? new URL(path).pathname : path.split('?')[0];
  const lower = pathname.toLowerCase();
  return lower.length > 1 && lower.endsWith('/') ? lower.slice(0, -1) : lower;
}

// ---------------------------------------------------------------- invalid values

const BAD_NAMES: unknown[] = [
  1,
  -1,
  0,
  true,
  false,
  null,
  [],
  {},
  ['etcd-9'],
  { name: 'etcd-9' },
  '',
  ' ',
  'UPPER',
  '-lead',
  'trail-',
  'a_b',
  'a..b',
  '.a',
  'a.',
  'a'.repeat(254),
  `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(64)}`,
  '../etcd-0',
  'etcd-0/../etcd-1',
  'etcd 0',
  'etcd\u00000',
  'ｅｔｃｄ-9',
  '\u0435tcd-9',
  'etcd-9\n',
  'etcd-9\r\nX-Evil: 1',
  'etcd-9\u200b',
  '\u202eetcd-9',
  '🙂',
  'a/b',
  '%2e%2e',
  'etcd-0;rm -rf /',
  '$(id)',
  '`id`',
  '<script>',
  'etcd-9\\',
  "etcd-9'",
  'etcd-9"',
  '\ud800',
  'a'.repeat(60_000),
];
const BAD_PEER_URL_LISTS: unknown[] = [
  'http://127.0.0.1:9',
  [],
  [1],
  [null],
  [''],
  [['http://127.0.0.1:9']],
  [{ url: 'http://127.0.0.1:9' }],
  ['ftp://127.0.0.1:9'],
  ['http://127.0.0.1'],
  ['http://127.0.0.1:0'],
  ['http://127.0.0.1:65536'],
  ['http://127.0.0.1:-1'],
  ['http://127.0.0.1:9:9'],
  ['http://u:p@127.0.0.1:9'],
  ['http://@127.0.0.1:9'],
  ['http://127.0.0.1:9/'.concat('x')],
  ['http://127.0.0.1:9/../../etc'],
  ['http://127.0.0.1:9?q=1'],
  ['http://127.0.0.1:9#f'],
  ['javascript:alert(1)//127.0.0.1:9'],
  ['file:///etc/passwd'],
  ['unix:///var/run/etcd.sock'],
  ['http://[::1:9'],
  ['http://[zz::1]:9'],
  ['http:// 127.0.0.1:9'],
  ['http://127.0.0.1:9\n'],
  [' http://127.0.0.1:9'],
  ['http://127.0.0.1:\uff19'],
  ['http://127.0.0.1:9\\@evil:1'],
  ['http://exa mple:9'],
  ['http://ex%61mple:9'],
  ['http:/127.0.0.1:9'],
  ['http:127.0.0.1:9'],
  ['//127.0.0.1:9'],
  ['127.0.0.1:9'],
  ['http://\u0435xample:9'],
  ['http://127.0.0.1:9\u0000'],
  Array.from({ length: 17 }, (_, i) => `http://127.0.0.1:${9000 + i}`),
  [`http://${'a'.repeat(60_000)}:9`],
  'x'.repeat(1000),
];
const BAD_BOOLEANS: unknown[] = ['true', 'false', 1, 0, null, 'yes', [], {}, [true]];
const BAD_TIMEOUTS: unknown[] = [0, 61, -1, 1.5, '30', null, true, 1e308, -1e308, [30], {}, 2 ** 53 + 1, 0.0001, 600];
const BAD_IDS: unknown[] = [
  123,
  0,
  '',
  'zz',
  '0x',
  '-1',
  '1'.repeat(17),
  ' 1',
  '1 ',
  '0xg',
  true,
  null,
  [],
  '\uff11',
  '1g3',
  '0x'.concat('f'.repeat(17)),
];

/** Per POST route: a valid body and, per field, values that must be refused. */
const POST_BODIES: Record<string, { base: Record<string, unknown>; fields: Record<string, unknown[]> }> = {
  '/v1/members/join': {
    base: { name: 'etcd-9', peerURLs: ['http://127.0.0.1:9'] },
    fields: { name: BAD_NAMES, peerURLs: BAD_PEER_URL_LISTS, learner: BAD_BOOLEANS, wait: BAD_BOOLEANS, timeoutSeconds: BAD_TIMEOUTS },
  },
  '/v1/members/leave': {
    base: { name: 'etcd-9' },
    fields: { name: BAD_NAMES, peerURLs: BAD_PEER_URL_LISTS, id: BAD_IDS, force: BAD_BOOLEANS, timeoutSeconds: BAD_TIMEOUTS },
  },
  '/v1/members/promote': {
    base: { name: 'etcd-9' },
    fields: { name: BAD_NAMES, peerURLs: BAD_PEER_URL_LISTS, id: BAD_IDS, timeoutSeconds: BAD_TIMEOUTS },
  },
  '/v1/leader/transfer': {
    base: { to: 'etcd-1' },
    fields: { to: BAD_NAMES, timeoutSeconds: BAD_TIMEOUTS },
  },
  '/v1/maintenance/defragment': {
    base: { minFragmentation: 0.5, compact: false },
    fields: {
      minFragmentation: [0, -0.1, 1.01, '0.5', null, true, [0.5], {}, Number.MAX_VALUE],
      minDbSizeBytes: [-1, 1.5, '100', null, true, [1], {}, 2 ** 53 + 1],
      compact: [
        true,
        {},
        { retainRevisions: 0 },
        { retainSeconds: 1.5 },
        { retainRevisions: 1, retainSeconds: 1 },
        { retain: 10 },
        '1h',
        10,
        null,
        [],
      ],
      force: BAD_BOOLEANS,
      timeoutSeconds: BAD_TIMEOUTS,
    },
  },
  '/v1/backups': {
    // Valid as sent, and refused for the store this agent lacks (409): nothing is written either way.
    base: { verify: true },
    fields: { verify: BAD_BOOLEANS, timeoutSeconds: BAD_TIMEOUTS },
  },
  '/v1/backups/verify': {
    base: { name: '20261204T230000.123Z-1a2b3c' },
    fields: { name: [1, null, '', 'a'.repeat(201), [], {}, true], timeoutSeconds: BAD_TIMEOUTS },
  },
  '/v1/recovery': {
    // Valid as sent, and refused by the gates (the quorum is there): nothing may change either way.
    base: { from: 'etcd-9', clusterId: 'abc' },
    fields: {
      from: BAD_NAMES,
      clusterId: [1, null, '', 'xyz', '0x', '1'.repeat(17), ['abc'], {}, true, 'abc; rm -rf /'],
      force: BAD_BOOLEANS,
      timeoutSeconds: BAD_TIMEOUTS,
    },
  },
  [KBAGENT]: {
    base: { action: 'memberJoin', parameters: { KB_JOIN_MEMBER_POD_NAME: 'etcd-9' } },
    fields: {
      action: [1, null, '', 'a'.repeat(129), [], {}, true, ['memberJoin']],
      parameters: [
        'x',
        [1],
        1,
        null,
        { KB_JOIN_MEMBER_POD_NAME: 1 },
        { KB_JOIN_MEMBER_POD_NAME: null },
        { KB_JOIN_MEMBER_POD_NAME: ['etcd-9'] },
        { KB_JOIN_MEMBER_POD_NAME: { x: 1 } },
        {},
        { KB_JOIN_MEMBER_POD_NAME: '' },
        ...BAD_NAMES.filter((n): n is string => typeof n === 'string' && n.trim() !== '').map((n) => ({ KB_JOIN_MEMBER_POD_NAME: n })),
        // The FQDN becomes part of a peer URL: every trick must end as a refused URL.
        ...[
          'evil.example/x',
          'u:p@evil.example',
          'evil.example:1',
          'evil.example#x',
          'evil.example?x',
          'evil\\x',
          'ev il',
          '../..',
          '%00',
          'a'.repeat(300),
        ].map((fqdn) => ({ KB_JOIN_MEMBER_POD_NAME: 'etcd-9', KB_JOIN_MEMBER_POD_FQDN: fqdn })),
      ],
      timeoutSeconds: BAD_TIMEOUTS,
    },
  },
};

const BAD_JSON: string[] = [
  '{',
  '}',
  '{"name":}',
  '{"name":"etcd-9",}',
  "{'name':'etcd-9'}",
  'nul',
  'undefined',
  '{"a":1}{"b":2}',
  '\u0000',
  '{"name": NaN}',
  '{"name": Infinity}',
  '0x10',
  '"just a string"',
  '[]',
  '123',
  'true',
  'null',
  '\ufeff{"name":"etcd-9","zz":1}',
  '{"name":"etcd-9"',
  '{"name":"etcd-9", "name"}',
  '/* c */ {"name":"etcd-9"}',
  '{"name":"etcd-9"} // c',
  '{"name":"\\x41"}',
  '{"name":"\\u12"}',
  '[['.repeat(20_000),
  '{"a":'.repeat(5000) + '1' + '}'.repeat(5000),
  `{"timeoutSeconds":1${'0'.repeat(5000)}}`,
  ' ',
  '\t\n',
];

const UNKNOWN_KEYS: string[] = [
  'extra',
  '__proto__',
  'constructor',
  'prototype',
  'Name',
  'name ',
  'peerUrls',
  'froce',
  '',
  '\u0000',
  'a'.repeat(1000),
  '🙂',
];

// ---------------------------------------------------------------- the generated cases

function generateCases(random: () => number): HostileCase[] {
  const cases: HostileCase[] = [];
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)];
  const postRoutes = ROUTES.filter((r) => r.method === 'POST').map((r) => r.path);
  const getRoutes = ['/v1/members', '/v1/operations', '/v1/health', '/v1/health/local'];

  for (const path of postRoutes) {
    const { base, fields } = POST_BODIES[path];
    // Wrong types and invalid values, one field at a time.
    for (const [field, values] of Object.entries(fields)) {
      for (const value of values)
        cases.push(postJson('wrong type / invalid value', `${path} ${field}=${preview(value)}`, path, { ...base, [field]: value }));
    }
    // Random combinations of two or three invalid fields over a random subset of valid ones.
    for (let i = 0; i < 12; i++) {
      const body: Record<string, unknown> = random() < 0.5 ? { ...base } : {};
      const names = Object.keys(fields);
      for (let k = 0; k < 2 + Math.floor(random() * 2); k++) {
        const field = pick(names);
        body[field] = pick(fields[field]);
      }
      body[pick(UNKNOWN_KEYS.filter((key) => key !== '__proto__'))] = pick([1, 'x', null]);
      cases.push(postJson('random combination', `${path} ${preview(body)}`, path, body));
    }
    for (const text of BAD_JSON) cases.push(post('bad JSON', `${path} ${preview(text)}`, path, text));
    for (const key of UNKNOWN_KEYS) {
      cases.push(
        post(
          'unknown field',
          `${path} +${preview(key)}`,
          path,
          `{${JSON.stringify(key)}:{"polluted":true},${JSON.stringify(base).slice(1)}`,
        ),
      );
    }
    // Size: a body over 64 KiB, a far larger one, a zip bomb, a body longer than its Content-Length says.
    cases.push(post('huge', `${path} 65 KiB`, path, JSON.stringify({ ...base, pad: 'x'.repeat(65 * 1024) })));
    cases.push(post('huge', `${path} 2 MiB`, path, JSON.stringify({ ...base, pad: 'x'.repeat(2 * 1024 * 1024) })));
    cases.push(
      post('huge', `${path} gzip bomb (10 MiB inflated)`, path, gzipSync(Buffer.from(`{"pad":"${'0'.repeat(10 * 1024 * 1024)}"}`)), {
        ...JSON_TYPE,
        'Content-Encoding': 'gzip',
      }),
    );
    // Unicode and encodings.
    cases.push(post('unicode', `${path} invalid UTF-8`, path, Buffer.from([0x7b, 0x22, 0x6e, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d])));
    cases.push(
      post(
        'unicode',
        `${path} overlong UTF-8 "/"`,
        path,
        Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]),
      ),
    );
    cases.push(
      post('unicode', `${path} UTF-16 body`, path, Buffer.from(JSON.stringify(base), 'utf16le'), {
        'Content-Type': 'application/json; charset=utf-16',
      }),
    );
    cases.push(
      post('unicode', `${path} latin1 charset`, path, JSON.stringify(base), { 'Content-Type': 'application/json; charset=latin1' }),
    );
    cases.push(postJson('unicode', `${path} unicode keys`, path, { ...base, '\u0435xtra': 1, ｎａｍｅ: 'etcd-9' }));
    // Header abuse (each with a body that is itself invalid, so no outcome depends on leniency).
    const invalid = JSON.stringify({ ...base, zz: 1 });
    const headerCases: Array<[string, Record<string, string | number>, string | Buffer]> = [
      ['text/plain', { 'Content-Type': 'text/plain' }, invalid],
      ['form-urlencoded', { 'Content-Type': 'application/x-www-form-urlencoded' }, 'name=etcd-9&zz=1'],
      ['multipart', { 'Content-Type': 'multipart/form-data; boundary=x' }, '--x\r\n\r\nname\r\n--x--'],
      ['application/jsonp', { 'Content-Type': 'application/jsonp' }, invalid],
      ['no content type', {}, invalid],
      ['two content types', { 'Content-Type': 'application/json, text/plain' }, invalid],
      ['gzip garbage', { ...JSON_TYPE, 'Content-Encoding': 'gzip' }, 'not gzip at all'],
      ['deflate garbage', { ...JSON_TYPE, 'Content-Encoding': 'deflate' }, 'not deflate'],
      ['brotli', { ...JSON_TYPE, 'Content-Encoding': 'br' }, invalid],
      ['gzip twice', { ...JSON_TYPE, 'Content-Encoding': 'gzip, gzip' }, gzipSync(gzipSync(invalid))],
      ['unknown encoding', { ...JSON_TYPE, 'Content-Encoding': 'x-evil' }, invalid],
      ['huge authorization', { ...JSON_TYPE, Authorization: `Bearer ${'t'.repeat(8000)}` }, invalid],
      ['request id with control bytes', { ...JSON_TYPE, 'X-Request-Id': 'abc\u0001def' }, invalid],
      ['request id of 10 KiB', { ...JSON_TYPE, 'X-Request-Id': 'r'.repeat(10 * 1024) }, invalid],
      [
        'forwarded headers',
        { ...JSON_TYPE, 'X-Forwarded-For': '10.0.0.1', 'X-Forwarded-Host': 'evil', Forwarded: 'for=10.0.0.1' },
        invalid,
      ],
      ['method override', { ...JSON_TYPE, 'X-HTTP-Method-Override': 'DELETE' }, invalid],
      ['Expect: 100-continue', { ...JSON_TYPE, Expect: '100-continue' }, invalid],
      [
        'chunked body',
        { ...JSON_TYPE, 'Transfer-Encoding': 'chunked' },
        `${Buffer.byteLength(invalid).toString(16)}\r\n${invalid}\r\n0\r\n\r\n`,
      ],
      [
        '400 headers',
        Object.fromEntries([...Array.from({ length: 400 }, (_, i) => [`X-H${i}`, 'v']), ['Content-Type', 'application/json']]),
        invalid,
      ],
    ];
    for (const [title, headers, body] of headerCases) cases.push(post('header abuse', `${path} ${title}`, path, body, headers));
    cases.push({
      family: 'header abuse',
      title: `${path} Expect: bogus`,
      pieces: [request('POST', path, { ...JSON_TYPE, Expect: 'bogus' }, invalid)],
      route: { method: 'POST', path },
      expect: 'refused',
    });
    // Path tricks that still reach the route, and that must not.
    for (const trick of [
      `${path}/`,
      path.toUpperCase(),
      `http://evil.example${path}`,
      `${path}?force=true`,
      `${path}?`,
      `${path}?name=etcd-9`,
    ]) {
      cases.push(post('path trick', `${trick}`, trick, invalid));
    }
    for (const trick of [
      `/${path}`,
      `${path}/.`,
      path.replace(/\/[^/]+$/, '/../$&'),
      `${path}%2f`,
      `${path};x`,
      `${path}%00`,
      `${path}/x`,
      `${path}.json`,
    ]) {
      cases.push(post('path trick', `${trick}`, trick, invalid));
    }
    // Wrong methods (GET is right where the path is also a read: /v1/recovery).
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'].filter(
      (m) => !ROUTES.some((r) => r.path === path && r.method === m),
    )) {
      cases.push({
        family: 'method',
        title: `${method} ${path}`,
        pieces: [request(method, path, JSON_TYPE, invalid)],
        route: { method, path },
        expect: 'refused',
      });
    }
  }

  // Reads: unknown or invalid query parameters, path tricks, wrong methods.
  for (const path of getRoutes) {
    const queries = ['?x=1', '?expected=etcd-0&x=1', '?__proto__=1', '?a[b]=c', `?${'k'.repeat(4000)}=1`, '?%zz=1', '?expected', '?=1'];
    if (path === '/v1/health') {
      queries.push(
        '?expected=',
        '?expected=,',
        '?expected=etcd-0&expected=etcd-1',
        '?expected=../etcd-0',
        '?expected=ETCD-0',
        '?expected=etcd-0%00',
        `?expected=${'a,'.repeat(3000)}`,
        `?expected=${'a'.repeat(254)}`,
        '?expected=%F0%9F%99%82',
        '?expected[]=etcd-0',
        '?expected=etcd-0;x',
      );
    }
    for (const q of queries) {
      if (path === '/v1/health' && q === '?expected') continue; // an empty `expected` is covered above
      cases.push({
        family: 'query',
        title: `GET ${path}${q.slice(0, 60)}`,
        pieces: [request('GET', `${path}${q}`, {})],
        route: { method: 'GET', path },
        expect: 'refused',
      });
    }
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH'].filter((m) => !ROUTES.some((r) => r.path === path && r.method === m))) {
      cases.push({
        family: 'method',
        title: `${method} ${path}`,
        pieces: [request(method, path, JSON_TYPE, '{}')],
        route: { method, path },
        expect: 'refused',
      });
    }
  }
  for (const p of [
    '/',
    '/v1',
    '/v1/',
    '/v1/members/etcd-0',
    '/v2/members',
    '/%',
    '/%zz',
    '/..%2f..%2fetc%2fpasswd',
    '/v1/health/local/../../livez',
    `/${'a'.repeat(8000)}`,
    '/\u00e9t\u00e9',
  ]) {
    cases.push({
      family: 'path trick',
      title: `GET ${p.slice(0, 60)}`,
      pieces: [request('GET', encodeURI(p) === p ? p : p, {})],
      route: { method: 'GET', path: p },
      expect: 'refused',
    });
  }

  // Broken framing and protocol abuse: Node refuses these before any route runs.
  const protocol: Array<[string, string | Buffer]> = [
    ['garbage', 'BLAH\r\n\r\n'],
    ['unknown method', 'FOO /v1/members HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'],
    ['TLS hello on plain port', Buffer.from('16030100a5010000a10303', 'hex')],
    [
      'two Content-Lengths',
      'POST /v1/members/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}',
    ],
    [
      'Content-Length and chunked',
      'POST /v1/members/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    ],
    [
      'bad chunk size',
      'POST /v1/members/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
    ],
    ['negative Content-Length', 'POST /v1/members/join HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n'],
    ['header without colon', 'GET /v1/members HTTP/1.1\r\nHost: x\r\nBroken header\r\n\r\n'],
    ['header name with space', 'GET /v1/members HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n'],
    ['NUL in header value', 'GET /v1/members HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\n\r\n'],
    ['bare LF line ends', 'GET /v1/members?x=1 HTTP/1.1\nHost: x\n\n'],
    ['space in path', 'GET /v1/mem bers HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['control byte in path', 'GET /v1/members\u0001 HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['header of 20 KiB', `GET /v1/members HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(20 * 1024)}\r\n\r\n`],
    ['no Host header', 'POST /v1/members/join HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'],
    ['HTTP/1.0 with a bad body', 'POST /v1/members/join HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: 1\r\n\r\n{'],
    ['obsolete line folding', 'GET /v1/members?x=1 HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n'],
  ];
  for (const [title, bytes] of protocol) cases.push({ family: 'protocol', title, pieces: [bytes], expect: 'refused' });

  // Slow bodies: one that trickles in but completes (answered as usual), and stalls that the agent cuts.
  const slow = Buffer.from(JSON.stringify({ name: 'etcd-9', zz: 1 }).padEnd(48, ' '));
  const head = (length: number): string =>
    `POST /v1/members/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n`;
  cases.push({
    family: 'slow body',
    title: 'a body trickled one byte per 25 ms (1.2 s), complete',
    pieces: [head(slow.length), ...[...slow].flatMap((b) => [{ pauseMs: 25 }, Buffer.from([b])])],
    route: { method: 'POST', path: '/v1/members/join' },
    expect: 'refused',
  });
  cases.push({
    family: 'slow body',
    title: 'a body that stops after 10 of 100 bytes',
    pieces: [head(100), '{"name":"e', { pauseMs: 60_000 }],
    expect: 'refused',
  });
  cases.push({
    family: 'slow body',
    title: 'headers that never end',
    pieces: ['POST /v1/members/join HTTP/1.1\r\nHost: x\r\n', { pauseMs: 60_000 }],
    expect: 'refused',
  });
  cases.push({
    family: 'slow body',
    title: 'headers trickled one line per 300 ms, never ending',
    pieces: ['POST /v1/members/join HTTP/1.1\r\n', ...Array.from({ length: 200 }, (_, i) => [{ pauseMs: 300 }, `X-${i}: v\r\n`]).flat()],
    expect: 'refused',
  });
  return cases;
}

function preview(value: unknown): string {
  const text = typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  return text.length > 50 ? `${text.slice(0, 47)}...(${text.length})` : text;
}

// ---------------------------------------------------------------- judging answers

const CODES = new Set(Object.keys(ERROR_CODES));

/** Why `answer` breaks the rule for `c`, or undefined when it keeps it. */
function violation(c: HostileCase, answer: RawAnswer): string | undefined {
  if (answer.noAnswer) return `no answer; the connection closed after ${answer.elapsedMs} ms`;
  if (answer.elapsedMs > CUT_BY_MS) return `answered only after ${answer.elapsedMs} ms`;
  const kbagent = c.route !== undefined && c.route.method === 'POST' && routeOf(c.route.path) === KBAGENT;
  if (kbagent && answer.status === 200) {
    // docs/api.md §5: always 200, failure as {error, message}; never a success for these bodies.
    if (typeof answer.json?.error !== 'string' || typeof answer.json?.message !== 'string')
      return `kbagent 200 without {error, message}: ${answer.body.slice(0, 200)}`;
    if (answer.json.output !== undefined) return 'kbagent answered success';
    return undefined;
  }
  if (answer.status === undefined || answer.status < 400 || answer.status > 499)
    return `HTTP ${answer.status}: ${answer.body.slice(0, 200)}`;
  const j = answer.json;
  if (typeof j !== 'object' || j === null)
    return `HTTP ${answer.status} with a body that is not JSON: ${JSON.stringify(answer.body.slice(0, 100))}`;
  if (typeof j.requestId !== 'string' || j.requestId === '') return 'no requestId';
  if (answer.headers['x-request-id'] !== j.requestId)
    return `X-Request-Id ${answer.headers['x-request-id']} differs from the body's ${j.requestId}`;
  if (!/^[A-Za-z0-9._:-]{1,128}$/.test(j.requestId)) return `requestId echoes hostile input: ${JSON.stringify(j.requestId.slice(0, 50))}`;
  if (!CODES.has(j.error?.code)) return `unknown error code ${j.error?.code}`;
  if (ERROR_CODES[j.error.code as keyof typeof ERROR_CODES].status !== answer.status)
    return `code ${j.error.code} with HTTP ${answer.status}`;
  if (typeof j.error.message !== 'string' || typeof j.error.retryable !== 'boolean') return 'error without message or retryable';
  return undefined;
}

// ---------------------------------------------------------------- the suite

describe('hostile input (real etcd, real HTTP)', () => {
  const cluster = withCluster(3);
  let agent: RunningAgent;
  let logs = '';
  const host = '127.0.0.1';
  const port = (): number => agent.listening.port;
  const livez = async (): Promise<RawAnswer> => rawRequest(host, port(), [request('GET', '/livez', {})], 5000);

  beforeAll(async () => {
    const stream = new Writable({
      write(chunk, _encoding, done) {
        logs += String(chunk);
        done();
      },
    });
    const { config } = loadConfig({
      ETCD_AGENT_LISTEN: '127.0.0.1:0',
      ETCD_AGENT_ENDPOINTS: cluster().clientURLs().join(','),
      ETCD_AGENT_LOCAL_ENDPOINT: cluster().member('etcd-0').clientURL,
      ETCD_AGENT_MEMBER_NAME: 'etcd-0',
    });
    agent = await startAgent(config, {
      logger: createLogger({ stream, level: 'info' }),
      metrics: createMetrics({ defaultMetrics: false }),
      listen: { requestTimeoutMs: REQUEST_TIMEOUT_MS },
    });
  });
  afterAll(async () => {
    await agent?.stop(2000);
  });

  it(
    `when hundreds of generated malformed requests hit every route (seed ${SEED}), then each is refused with a 4xx envelope, the agent stays up and the member list does not change`,
    async () => {
      const before = await cluster().listMembers();
      const cases = generateCases(prng(SEED));
      const failures: string[] = [];
      const perFamily = new Map<string, number>();
      const started = Date.now();

      // Eight at a time: slow cases overlap with the rest, and the agent serves concurrent abuse.
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < cases.length) {
          const c = cases[next++];
          const answer = await rawRequest(host, port(), c.pieces, REQUEST_TIMEOUT_MS + 5000);
          perFamily.set(c.family, (perFamily.get(c.family) ?? 0) + 1);
          const why = violation(c, answer);
          if (why !== undefined) failures.push(`[${c.family}] ${c.title}: ${why}`);
        }
      };
      await Promise.all(Array.from({ length: 8 }, worker));

      const summary = [...perFamily].map(([f, n]) => `${f} ${n}`).join(', ');
      process.stdout.write(`hostile input: ${cases.length} requests in ${Date.now() - started} ms (seed ${SEED}): ${summary}\n`);
      expect(cases.length).toBeGreaterThanOrEqual(200);
      expect(failures.slice(0, 25)).toEqual([]);

      expect((await livez()).status).toBe(200);
      expect(await changesSent(agent.metrics)).toEqual({ add: 0, remove: 0, promote: 0, 'move-leader': 0 });
      expect(await cluster().listMembers()).toEqual(before);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect(logs).not.toMatch(/"level":"error"/);
    },
    patience(120_000),
  );

  it(
    'when 50 connections stall mid-request at once, then /livez answers while they are all still open, and the stalled ones are cut within the request timeout',
    async () => {
      const stalled = Array.from({ length: 50 }, () => {
        let written = (): void => undefined;
        const sent = new Promise<void>((resolve) => (written = resolve));
        const answer = rawRequest(
          host,
          port(),
          [
            'POST /v1/members/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{',
            { pauseMs: 60_000 },
          ],
          20_000,
          { written: () => written() },
        );
        return { sent, answer };
      });
      // Every stalled request has been sent before /livez is asked.
      await Promise.all(stalled.map((s) => s.sent));
      const alive = await livez();
      expect(alive.status).toBe(200);

      const answers = await Promise.all(stalled.map((s) => s.answer));
      // Answered while all 50 were still held open: none of them had been cut yet.
      expect(answers.filter((a) => a.endedAt <= alive.endedAt)).toEqual([]);
      for (const a of answers) {
        expect(a.elapsedMs).toBeLessThan(CUT_BY_MS);
        expect([a.status, a.json?.error?.code]).toEqual([400, 'bad-request']);
      }
      expect((await livez()).status).toBe(200);
    },
    patience(30_000),
  );
});
