/**
 * The built agent (the bin, `etcd-lifecycle-agent serve`, started with the Node flags of its first
 * line) as a child process that a test can SIGKILL and start again, with its JSON log lines
 * collected. The bin is the one build of dist/ (MAIN_JS, see built-agent.ts).
 */
import { ChildProcess, spawn } from 'node:child_process';
import { binCommand } from '../../scripts/bin-command';
import { patience } from './eventually';
import { call } from './http-call';

export { MAIN_JS } from './built-agent';

/** One parsed log line of the agent. */
export type LogLine = Record<string, unknown> & { message?: string; level?: string };

/** A running `etcd-lifecycle-agent serve` child. */
export class ChildAgent {
  readonly lines: LogLine[] = [];
  readonly exited: Promise<void>;
  /** How it ended, and when (`performance.now()`), once it has. */
  exit?: { code: number | null; signal: NodeJS.Signals | null; at: number };
  private readonly watchers: Array<(line: LogLine) => void> = [];
  url = '';

  private constructor(private readonly child: ChildProcess) {
    let buffer = '';
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      buffer += chunk;
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const text = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        let line: LogLine;
        try {
          line = JSON.parse(text) as LogLine;
        } catch {
          continue; // not a log line
        }
        this.lines.push(line);
        // Synchronously, in the same callback: a kill on a line must not wait for another turn of the loop.
        for (const watch of [...this.watchers]) watch(line);
      }
    });
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.exit = { code, signal, at: performance.now() };
        resolve();
      }),
    );
  }

  /**
   * Starts `main serve` (with the Node flags of its first line) with `env` (nothing inherited but PATH) and waits for its "listening" line
   * (or, with ETCD_AGENT_CRASH_POINTS set, for its death at a crash point taken before it listens).
   * `wrap` runs the command inside something else that then execs it, such as a memory cgroup
   * (memory-limit.ts); the child's pid stays the agent's.
   */
  static async start(
    main: string,
    env: Record<string, string>,
    timeoutMs = 15_000,
    wrap: (command: string, argv: string[]) => [string, string[]] = (command, argv) => [command, argv],
  ): Promise<ChildAgent> {
    const [node, argv] = wrap(...binCommand(main, ['serve']));
    const child = spawn(node, argv, {
      env: { PATH: process.env.PATH, ETCD_AGENT_LISTEN: '127.0.0.1:0', ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const agent = new ChildAgent(child);
    const deadline = Date.now() + patience(timeoutMs);
    for (;;) {
      const listening = agent.lines.find((l) => l.message === 'listening');
      if (listening !== undefined) {
        agent.url = String(listening.url);
        return agent;
      }
      // Killed at a crash point (ETCD_AGENT_CRASH_POINTS) before it said it listens (a step taken at
      // start, resuming an order): it started all the same.
      if (child.signalCode === 'SIGKILL' && env.ETCD_AGENT_CRASH_POINTS !== undefined) {
        await agent.exited;
        return agent;
      }
      if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`the agent did not start (exit ${child.exitCode ?? child.signalCode})`);
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  /** Resolves with the first line (already seen or to come) that `match` accepts. */
  waitFor(match: (line: LogLine) => boolean, timeoutMs = 20_000): Promise<LogLine> {
    const seen = this.lines.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const waitMs = patience(timeoutMs);
      const timer = setTimeout(() => reject(new Error(`no matching log line within ${waitMs} ms`)), waitMs);
      this.onLine(match, (line) => {
        clearTimeout(timer);
        resolve(line);
      });
    });
  }

  /** Calls `act` synchronously when the first line `match` accepts arrives. */
  onLine(match: (line: LogLine) => boolean, act: (line: LogLine) => void): void {
    const watch = (line: LogLine): void => {
      if (!match(line)) return;
      this.watchers.splice(this.watchers.indexOf(watch), 1);
      act(line);
    };
    this.watchers.push(watch);
  }

  /**
   * A counter of its /metrics summed over the series that carry `labels` (and any others, such as
   * `result`), e.g. ('etcd_agent_membership_changes_total', 'kind="add"'), or over every series with
   * `''`; 0 when absent.
   */
  async counter(name: string, labels: string): Promise<number> {
    const text = (await call(this.url, { method: 'GET', path: '/metrics' })).text;
    const wanted = labels === '' ? [] : labels.split(',');
    let sum = 0;
    for (const line of text.split('\n')) {
      const series = /^(\S+?)\{(.*)\} (\S+)$/.exec(line);
      if (series === null || series[1] !== name) continue;
      const has = series[2].split(',');
      if (wanted.every((pair) => has.includes(pair))) sum += Number(series[3]);
    }
    return sum;
  }

  /** The child's process id. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Sends `signal`; resolves once the process is gone. */
  async kill(signal: NodeJS.Signals): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    await this.exited;
  }
}
