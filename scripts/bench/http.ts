/**
 * A minimal keep-alive HTTP/1.1 client for timing single calls to the agent
 * and to etcd's own endpoints from the bench process: one socket per client,
 * so consecutive calls measure the server, not connection set-up.
 */
import http from 'node:http';

/** One answer: HTTP status, parsed JSON body (or the raw text), and the round trip in ms. */
export interface HttpAnswer {
  status: number;
  body: unknown;
  ms: number;
  /** What was asked, for error messages. */
  request: string;
}

/** A keep-alive client of one base URL. */
export class HttpClient {
  private readonly agent: http.Agent;
  private readonly base: URL;

  constructor(baseUrl: string, maxSockets = 1) {
    this.base = new URL(baseUrl);
    this.agent = new http.Agent({ keepAlive: true, maxSockets });
  }

  /** GET `path`. */
  get(path: string, timeoutMs = 30_000): Promise<HttpAnswer> {
    return this.request('GET', path, undefined, timeoutMs);
  }

  /** POST `body` as JSON to `path`. */
  post(path: string, body: object, timeoutMs = 70_000): Promise<HttpAnswer> {
    return this.request('POST', path, body, timeoutMs);
  }

  /** Sends one request; rejects on a network error or after `timeoutMs`. */
  request(method: string, path: string, body: object | undefined, timeoutMs: number): Promise<HttpAnswer> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const started = performance.now();
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: this.base.hostname,
          port: this.base.port,
          method,
          path,
          agent: this.agent,
          timeout: timeoutMs,
          headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': payload.length },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const ms = performance.now() - started;
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown = text;
            try {
              parsed = JSON.parse(text);
            } catch {
              // not JSON (etcd's /metrics, the agent's /metrics): keep the text
            }
            resolve({
              status: res.statusCode ?? 0,
              body: parsed,
              ms,
              request: `${method} ${path} ${body === undefined ? '' : JSON.stringify(body)}`,
            });
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** Closes the kept-alive socket(s). */
  close(): void {
    this.agent.destroy();
  }
}

/** One GET on a fresh connection (for polling a port that may not listen yet); resolves the status or the error text. */
export function probeOnce(url: string, timeoutMs = 1000): Promise<number | string> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false, timeout: timeoutMs }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', (err) => resolve(err.message));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve(err.message));
  });
}
