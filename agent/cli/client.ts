/**
 * The HTTP client of the command line (docs/api.md §7): one call to a running
 * agent (http-request.ts: node:http, not fetch, so any port works), the bearer
 * token read from a file, and every way a call can fail turned into one line a
 * person can act on.
 */
import * as fs from 'node:fs';
import { request, RequestTimeout } from '../lib/http-request';

/** Where the agent is and how to call it. */
export interface AgentClientOptions {
  /** Base URL, e.g. http://127.0.0.1:3501. */
  url: string;
  /** File holding the bearer token (trailing newline ignored). */
  tokenFile?: string;
  /** How long to wait for an answer before giving up. */
  timeoutMs: number;
}

/** An answer of the agent: its HTTP status and its JSON body. */
export interface AgentAnswer {
  status: number;
  body: Record<string, unknown>;
}

/** The call never got a JSON answer: the agent is unreachable, silent, or not the agent. */
export class AgentCallError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AgentCallError';
  }
}

/** Calls a running agent over HTTP. */
export class AgentClient {
  private readonly base: string;

  constructor(private readonly options: AgentClientOptions) {
    this.base = options.url.replace(/\/+$/, '');
  }

  /** GET `path`. */
  get(path: string): Promise<AgentAnswer> {
    return this.call('GET', path);
  }

  /** POST `body` as JSON to `path`, with the bearer token when one is configured. */
  post(path: string, body: object): Promise<AgentAnswer> {
    return this.call('POST', path, body);
  }

  private async call(method: 'GET' | 'POST', path: string, body?: object): Promise<AgentAnswer> {
    const headers: Record<string, string> = { Accept: 'application/json' };
    const payload = body === undefined ? undefined : JSON.stringify(body);
    if (payload !== undefined) headers['Content-Type'] = 'application/json';
    const token = this.token();
    if (token !== undefined) headers.Authorization = `Bearer ${token}`;
    const url = `${this.base}${path}`;
    let res: { status: number; text: string };
    try {
      res = await request(url, { method, headers, payload, timeoutMs: this.options.timeoutMs });
    } catch (err) {
      throw new AgentCallError(unreachable(url, err, this.options.timeoutMs));
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(res.text);
    } catch {
      parsed = undefined;
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new AgentCallError(`unexpected answer from ${url}: HTTP ${res.status}, not a JSON object`);
    }
    return { status: res.status, body: parsed as Record<string, unknown> };
  }

  private token(): string | undefined {
    const file = this.options.tokenFile;
    if (file === undefined || file === '') return undefined;
    let token: string;
    try {
      token = fs.readFileSync(file, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      throw new AgentCallError(`cannot read the token file ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
    return token === '' ? undefined : token;
  }
}

/** One line saying why the call failed: refused, no such host, timed out. */
function unreachable(url: string, err: unknown, timeoutMs: number): string {
  if (err instanceof RequestTimeout) return `the agent at ${url} did not answer within ${Math.round(timeoutMs / 1000)} s`;
  const reason = (err as { code?: string } | undefined)?.code ?? (err instanceof Error ? err.message : String(err));
  return `cannot reach the agent at ${url}: ${reason}`;
}
