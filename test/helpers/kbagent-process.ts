/**
 * The real kbagent (scripts/kbagent.sh builds it from the Go module proxy) as a child process: its
 * path and module version, its JSON log lines with the time each arrived, and a Go template engine
 * made of one (its HTTP action bodies are rendered by text/template with sprig functions and
 * missingkey=error over the call's parameters, as KubeBlocks renders the vars' expressions).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { freePorts } from '../../scripts/ports';
import { KEEP_ALIVE_TIMEOUT_MS } from '../../agent/config/timings';
import { ROOT } from './built-agent';
import { patience } from './eventually';
import { goActionRequestJson, goHttpRequest } from './go-wire';
import { rawRequest } from './raw-http';

/** The kbagent binary and the KubeBlocks module version it was built from (`go version -m`). */
export interface KbAgentBinary {
  path: string;
  version: string;
}

function exec(file: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd: ROOT, timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const how = err === null ? '' : err.signal ? `killed by ${err.signal}` : `exit ${String(err.code)}`;
      if (err) reject(new Error(`${file} ${args.join(' ')} failed (${how}): ${String(stderr).trim() || err.message}`));
      else resolve(String(stdout));
    });
  });
}

/** Builds kbagent when it is missing (scripts/kbagent.sh: minutes the first time) and reads its version. */
export async function kbAgentBinary(): Promise<KbAgentBinary> {
  const bin = (await exec('bash', ['scripts/kbagent.sh'], 15 * 60_000)).trim().split('\n').pop() as string;
  const info = await exec('go', ['version', '-m', bin], 30_000);
  const mod = /^\s*mod\s+github\.com\/apecloud\/kubeblocks\s+(\S+)/m.exec(info);
  if (mod === null) throw new Error(`go version -m ${bin} names no github.com/apecloud/kubeblocks module:\n${info}`);
  return { path: bin, version: mod[1] };
}

/** One log line of kbagent (zap, JSON) and when it arrived, in ms of `performance.now()`. */
export interface KbAgentLine {
  at: number;
  msg: string;
  // kbagent's fields vary by line (probe, code, output, message, action, result, …).
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  fields: Record<string, any>;
}

/** Collects a child's JSON log lines from stdout and stderr. */
export class KbAgentLog {
  readonly lines: KbAgentLine[] = [];
  private readonly watchers = new Set<(line: KbAgentLine) => void>();

  attach(child: ChildProcess): void {
    for (const stream of [child.stdout, child.stderr]) {
      let buffer = '';
      stream?.setEncoding('utf8');
      stream?.on('data', (chunk: string) => {
        buffer += chunk;
        let nl: number;
        while ((nl = buffer.indexOf('\n')) >= 0) {
          const text = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          let fields: Record<string, unknown>;
          try {
            fields = JSON.parse(text) as Record<string, unknown>;
          } catch {
            continue;
          }
          const line = { at: performance.now(), msg: String(fields.msg ?? ''), fields };
          this.lines.push(line);
          for (const watch of [...this.watchers]) watch(line);
        }
      });
    }
  }

  /** The first line after `since` (ms, performance.now()) that `match` accepts, waiting up to `timeoutMs` of patience (TEST_TIME_SCALE lengthens it). */
  waitFor(match: (line: KbAgentLine) => boolean, since: number, timeoutMs: number): Promise<KbAgentLine> {
    const seen = this.lines.find((l) => l.at >= since && match(l));
    if (seen !== undefined) return Promise.resolve(seen);
    const waitMs = patience(timeoutMs);
    return new Promise((resolve, reject) => {
      const watch = (line: KbAgentLine): void => {
        if (line.at < since || !match(line)) return;
        clearTimeout(timer);
        this.watchers.delete(watch);
        resolve(line);
      };
      const timer = setTimeout(() => {
        this.watchers.delete(watch);
        reject(new Error(`no matching kbagent log line within ${waitMs} ms`));
      }, waitMs);
      this.watchers.add(watch);
    });
  }
}

/**
 * A probe's result as kbagent reported it: without an API server every report ends in its log as
 * "failed to send the probe event, will retry later" with the event's code, output (its first 32
 * bytes) and message.
 */
export interface ProbeReport {
  at: number;
  probe: string;
  code: number;
  output: string;
  message: string;
}

/** The probe report of `line`, or undefined when it is not one. */
export function probeReport(line: KbAgentLine): ProbeReport | undefined {
  if (!/^(failed|succeed) to send the probe event/.test(line.msg)) return undefined;
  const f = line.fields;
  return { at: line.at, probe: String(f.probe), code: Number(f.code), output: String(f.output ?? ''), message: String(f.message ?? '') };
}

/** kbagent's answer to POST /v1.0/action, `output` decoded. */
export interface KbAgentAnswer {
  error?: string;
  message?: string;
  output?: string;
}

/** Reads a kbagent answer body: HTTP 200 `{"error", "message", "output" (base64)}`. */
export function kbAgentAnswer(status: number | undefined, body: string): KbAgentAnswer {
  if (status !== 200) throw new Error(`kbagent answered HTTP ${status ?? 'nothing'}: ${body}`);
  const json = JSON.parse(body) as { error?: string; message?: string; output?: string };
  return { ...json, ...(json.output === undefined ? {} : { output: Buffer.from(json.output, 'base64').toString('utf8') }) };
}

/**
 * A Go template engine made of a kbagent on 127.0.0.1: one HTTP action per template, whose body is
 * the template, posted to a local server that answers with the body it got (the rendering). Its
 * environment holds nothing but HOME and PATH, so a template sees its data and little else.
 */
export class GoTemplates {
  private constructor(
    private readonly child: ChildProcess,
    private readonly echo: http.Server,
    private readonly port: number,
    private readonly names: Map<string, string>,
    private readonly home: string,
  ) {}

  /** Starts the engine for `templates` (each rendered later by `render`). */
  static async start(kbagent: string, templates: string[]): Promise<GoTemplates> {
    const [port, streaming, echoPort] = await freePorts(3, '127.0.0.1');
    const echo = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => res.end(Buffer.concat(chunks)));
    });
    // kbagent keeps idle connections for 90 s; closing them sooner races its next POST (EOF).
    echo.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    await new Promise<void>((resolve) => echo.listen(echoPort, '127.0.0.1', resolve));
    const names = new Map(templates.map((t, i) => [t, `template${i}`]));
    const actions = templates.map((t, i) => ({
      name: `template${i}`,
      http: { port: String(echoPort), path: '/', method: 'POST', body: t },
    }));
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'kbagent-home-'));
    const child = spawn(
      kbagent,
      ['--address', '127.0.0.1', '--port', String(port), '--streaming-port', String(streaming), '--zap-encoder=json'],
      {
        env: { HOME: home, PATH: process.env.PATH, KB_AGENT_ACTION: JSON.stringify(actions) },
        stdio: ['ignore', 'ignore', 'ignore'],
      },
    );
    const engine = new GoTemplates(child, echo, port, names, home);
    const deadline = Date.now() + patience(10_000);
    while ((await rawRequest('127.0.0.1', port, [goHttpRequest('POST', '127.0.0.1', port, '/v1.0/action', [], '{}')], 1000)).noAnswer) {
      if (Date.now() > deadline || child.exitCode !== null) {
        await engine.stop();
        throw new Error('kbagent (the template engine) did not start');
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return engine;
  }

  /** `template` (one given to start) rendered over `data`; rejects with kbagent's message on a template error. */
  async render(template: string, data: Record<string, string>): Promise<string> {
    const action = this.names.get(template);
    if (action === undefined) throw new Error(`not a template of this engine: ${template}`);
    const body = goActionRequestJson({ action, parameters: data });
    const answer = await rawRequest(
      '127.0.0.1',
      this.port,
      [goHttpRequest('POST', '127.0.0.1', this.port, '/v1.0/action', [], body)],
      10_000,
    );
    const got = kbAgentAnswer(answer.status, answer.body);
    if (got.error !== undefined) throw new Error(`${got.error}: ${got.message}`);
    return got.output ?? '';
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve));
      this.child.kill('SIGKILL');
      await exited;
    }
    await new Promise((resolve) => this.echo.close(resolve));
    fs.rmSync(this.home, { recursive: true, force: true });
  }
}
