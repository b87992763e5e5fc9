/**
 * The HTTP client of the command line (CONTRACT §7): one call to a running
 * agent with Node's fetch, the bearer token read from a file, and every way a
 * call can fail turned into one line a person can act on.
 */
import * as fs from 'node:fs';

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
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const token = this.token();
    if (token !== undefined) headers.Authorization = `Bearer ${token}`;
    const url = `${this.base}${path}`;
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch (err) {
      throw new AgentCallError(unreachable(url, err, this.options.timeoutMs));
    }
    const text = await res.text().catch(() => '');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
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

/** One line saying why fetch failed: refused, no such host, timed out. */
function unreachable(url: string, err: unknown, timeoutMs: number): string {
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) {
    return `the agent at ${url} did not answer within ${Math.round(timeoutMs / 1000)} s`;
  }
  // undici reports "fetch failed" and puts the socket error in `cause`.
  const cause = err instanceof Error ? (err.cause as { code?: string; message?: string } | undefined) : undefined;
  const reason = cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
  return `cannot reach the agent at ${url}: ${reason}`;
}
