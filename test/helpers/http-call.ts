/**
 * A small HTTP(S) client for tests that need what fetch hides: the local
 * address a call leaves from, client certificates, raw bodies and headers.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';

/** TLS settings of a call: the CA to trust and an optional client certificate (file paths). */
export interface CallTls {
  ca?: string;
  cert?: string;
  key?: string;
}

/** One call: method, path, body (an object is sent as JSON) and transport details. */
export interface CallOptions {
  method?: string;
  path: string;
  body?: string | Buffer | object;
  headers?: Record<string, string | string[]>;
  /** The source address of the connection, e.g. 127.0.0.2. */
  localAddress?: string;
  tls?: CallTls;
  timeoutMs?: number;
}

/** An answer: status, headers, the raw text and the parsed JSON (undefined when not JSON). */
export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  // The body is whatever the server sent; tests look into it field by field.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

/** Makes one call to `baseUrl` (http or https) on a fresh connection. */
export function call(baseUrl: string, opts: CallOptions): Promise<Answer> {
  const url = new URL(opts.path, baseUrl);
  const secure = url.protocol === 'https:';
  let body: string | Buffer | undefined;
  const headers: Record<string, string | string[]> = { ...(opts.headers ?? {}) };
  if (opts.body !== undefined) {
    body = typeof opts.body === 'string' || Buffer.isBuffer(opts.body) ? opts.body : JSON.stringify(opts.body);
    if (!hasHeader(headers, 'content-type')) headers['Content-Type'] = 'application/json';
  }
  const tlsOptions: https.RequestOptions = secure
    ? {
        ca: opts.tls?.ca ? fs.readFileSync(opts.tls.ca) : undefined,
        cert: opts.tls?.cert ? fs.readFileSync(opts.tls.cert) : undefined,
        key: opts.tls?.key ? fs.readFileSync(opts.tls.key) : undefined,
      }
    : {};
  const request = secure ? https.request : http.request;
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: opts.method ?? (body === undefined ? 'GET' : 'POST'),
        headers,
        agent: false,
        localAddress: opts.localAddress,
        timeout: opts.timeoutMs ?? 15_000,
        ...tlsOptions,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: parseJson(text) });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url.href} within ${opts.timeoutMs ?? 15_000} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** `text` parsed as JSON, or undefined when it is not JSON. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function hasHeader(headers: Record<string, unknown>, name: string): boolean {
  return Object.keys(headers).some((h) => h.toLowerCase() === name);
}
