/**
 * One HTTP request over node:http (or https) with a time limit: the status and the body text, or a
 * rejection (the socket's error, whose `code` says why, or RequestTimeout). Not `fetch`: fetch
 * refuses the Fetch standard's "bad ports" (6000, 6665-6669, 10080, …) without connecting, and an
 * agent or a peer may listen on any port. Every plain HTTP(S) call of the agent goes through here:
 * the CLI's, prepare's and recovery's questions to agents, etcd's peer member list and metrics page.
 */
import * as fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';

/** No answer came within the request's time. */
export class RequestTimeout extends Error {
  constructor(
    readonly url: string,
    readonly timeoutMs: number,
  ) {
    super(`${url}: no answer within ${timeoutMs} ms`);
    this.name = 'RequestTimeout';
  }
}

export interface RequestOptions {
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  /** The body, sent with its Content-Length. */
  payload?: string;
  timeoutMs: number;
  /** For an https URL: the CA to trust and a client certificate (default: Node's CAs, none). */
  tls?: Pick<https.RequestOptions, 'ca' | 'cert' | 'key'>;
  /** The largest body read: a longer one ends the request with an error (default: no limit). */
  maxBytes?: number;
}

/** TLS material as files: the CA to trust and a client certificate (the agent's etcd TLS settings). */
export interface TlsFiles {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
}

/** The files read, as a request's `tls` for `url` (nothing for plain http). */
export function tlsFromFiles(url: string | URL, files: TlsFiles): RequestOptions['tls'] {
  if (!String(url).startsWith('https:')) return undefined;
  return {
    ...(files.caFile === undefined ? {} : { ca: fs.readFileSync(files.caFile) }),
    ...(files.certFile === undefined || files.keyFile === undefined
      ? {}
      : { cert: fs.readFileSync(files.certFile), key: fs.readFileSync(files.keyFile) }),
  };
}

/** Sends one request to `url`; resolves once the whole answer is read. */
export function request(url: string, options: RequestOptions): Promise<{ status: number; text: string }> {
  const { method = 'GET', payload, timeoutMs, maxBytes } = options;
  const headers = { ...options.headers, ...(payload === undefined ? {} : { 'Content-Length': String(Buffer.byteLength(payload)) }) };
  return new Promise((resolve, reject) => {
    let req: http.ClientRequest;
    try {
      req = (url.startsWith('https:') ? https : http).request(url, { method, headers, agent: false, ...options.tls });
    } catch (err) {
      reject(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    const timer = setTimeout(() => req.destroy(new RequestTimeout(url, timeoutMs)), timeoutMs);
    const fail = (err: Error): void => {
      clearTimeout(timer);
      reject(err);
    };
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        if (maxBytes !== undefined && text.length > maxBytes) req.destroy(new Error(`${url}: the answer is larger than ${maxBytes} bytes`));
      });
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, text });
      });
      res.on('error', fail);
    });
    req.on('error', fail);
    req.end(payload);
  });
}

/** GETs `url` and answers its body; rejects on a status other than 200. */
export async function getText(url: string, options: Omit<RequestOptions, 'method' | 'payload'>): Promise<string> {
  const res = await request(url, options);
  if (res.status !== 200) throw new Error(`${url} answered HTTP ${res.status}`);
  return res.text;
}

/** GETs `url` and parses its JSON body; rejects on a status other than 200, or a body that is not JSON. */
export async function getJson(url: string, timeoutMs: number): Promise<unknown> {
  return JSON.parse(await getText(url, { timeoutMs, headers: { Accept: 'application/json' } })) as unknown;
}
