/**
 * The agent under test as its own process (the bin, dist/bin/etcd-lifecycle-agent.js serve,
 * started by the node binary under test with the Node flags of the bin's first line),
 * so its start-up, memory (/proc/<pid>/status), descriptors (/proc/<pid>/fd)
 * and CPU profile are its own and not the load generator's.
 */
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { binNodeFlags } from '../bin-command';
import { freePort } from '../ports';
import type { HandleSnapshot } from './handle-probe';
import { HttpClient, probeOnce } from './http';
import { sleep } from './stats';

/** dist/ (this file runs as dist/scripts/bench/agent-process.js). */
const DIST = path.resolve(__dirname, '../..');
/** The built agent: the package's bin, as the image runs it. */
export const MAIN_JS = path.join(DIST, 'bin/etcd-lifecycle-agent.js');
/** USER_HZ: the unit of /proc/<pid>/stat CPU times (100 on Linux, whatever the kernel's HZ). */
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
const HANDLE_PROBE_JS = path.join(__dirname, 'handle-probe.js');

/** How to run one agent. */
export interface AgentOptions {
  endpoints: string[];
  localEndpoint: string;
  memberName: string;
  /** ETCD_AGENT_LOG_LEVEL; default warn, so logging does not dominate a load. */
  logLevel?: string;
  /** Extra ETCD_AGENT_* variables. */
  env?: Record<string, string>;
  /** Where the agent's stdout/stderr go, and CPU profiles and handle snapshots. */
  workDir: string;
  /** Label for file names. */
  label: string;
  /** Write a V8 CPU profile (--cpu-prof) into workDir when the agent exits. */
  cpuProfile?: boolean;
  /** Preload the handle probe and expose gc (soak run). */
  handleProbe?: boolean;
  /** Extra node flags (an experiment, e.g. --max-semi-space-size), after the bin's own. */
  nodeArgs?: string[];
  /** The node binary; default this process's. */
  node?: string;
}

const children = new Set<ChildProcess>();
let hooked = false;

/** A running agent process. */
export class AgentProcess {
  readonly http: HttpClient;
  private exitCode?: number | null;
  private readonly exited: Promise<number | null>;

  private constructor(
    readonly child: ChildProcess,
    readonly url: string,
    readonly opts: AgentOptions,
    /** Milliseconds from spawn to the first `/readyz` 200. */
    readonly startupMs: number,
    exited: Promise<number | null>,
  ) {
    this.http = new HttpClient(url);
    this.exited = exited;
    void exited.then((code) => (this.exitCode = code));
  }

  /** Spawns the agent on a free loopback port and resolves once `/readyz` answers 200. */
  static async start(opts: AgentOptions): Promise<AgentProcess> {
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      try {
        return await AgentProcess.spawnOn(port, opts);
      } catch (err) {
        // Another process may take the port between freePort and the agent's bind.
        if (attempt >= 3 || !String(err).includes('EADDRINUSE')) throw err;
      }
    }
  }

  private static async spawnOn(port: number, opts: AgentOptions): Promise<AgentProcess> {
    installExitHook();
    const env: NodeJS.ProcessEnv = {
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ETCD_AGENT_') && !k.startsWith('KB_'))),
      ETCD_AGENT_LISTEN: `127.0.0.1:${port}`,
      ETCD_AGENT_ENDPOINTS: opts.endpoints.join(','),
      ETCD_AGENT_LOCAL_ENDPOINT: opts.localEndpoint,
      ETCD_AGENT_MEMBER_NAME: opts.memberName,
      ETCD_AGENT_LOG_LEVEL: opts.logLevel ?? 'warn',
      ...opts.env,
    };
    const nodeArgs: string[] = [...(opts.nodeArgs ?? [])];
    if (opts.cpuProfile) nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${opts.workDir}`, `--cpu-prof-name=${opts.label}.cpuprofile`);
    if (opts.handleProbe) {
      nodeArgs.push('--expose-gc', '-r', HANDLE_PROBE_JS);
      env.BENCH_HANDLE_PROBE_FILE = path.join(opts.workDir, `${opts.label}.handles.json`);
    }
    const logFile = path.join(opts.workDir, `${opts.label}.log`);
    const log = fs.openSync(logFile, 'a');
    const [cmd, argv] = withParentDeathSignal([opts.node ?? process.execPath, ...binNodeFlags(MAIN_JS), ...nodeArgs, MAIN_JS, 'serve']);
    const started = performance.now();
    const child = spawn(cmd, argv, { env, stdio: ['ignore', log, log] });
    fs.closeSync(log);
    children.add(child);
    let gone: number | null | undefined;
    const exited = new Promise<number | null>((resolve) => {
      child.once('exit', (code, signal) => {
        children.delete(child);
        gone = code ?? (signal ? -1 : null);
        resolve(gone);
      });
    });
    const url = `http://127.0.0.1:${port}`;
    for (;;) {
      if (gone !== undefined) throw new Error(`agent ${opts.label} exited (${gone}) before /readyz: ${tail(logFile)}`);
      if ((await probeOnce(`${url}/readyz`, 500)) === 200) break;
      if (performance.now() - started > 30_000) {
        child.kill('SIGKILL');
        throw new Error(`agent ${opts.label}: no /readyz 200 within 30 s: ${tail(logFile)}`);
      }
      await sleep(2);
    }
    return new AgentProcess(child, url, opts, performance.now() - started, exited);
  }

  /** The process id. */
  get pid(): number {
    const pid = this.child.pid;
    if (pid === undefined) throw new Error('agent has no pid');
    return pid;
  }

  /** Resident memory in MiB (VmRSS of /proc/<pid>/status). */
  rssMiB(): number {
    return procRssMiB(this.pid);
  }

  /** Resident memory by kind of mapping, MiB (see {@link memoryMapOf}). */
  memoryMap(): Record<string, number> {
    return memoryMapOf(this.pid);
  }

  /** CPU seconds (user + system) the process has used so far. */
  cpuSeconds(): number {
    const stat = fs.readFileSync(`/proc/${this.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of proc(5) (utime, stime), counted from the state field (3): indexes 11 and 12.
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  }

  /** Open file descriptors (sockets included). */
  fdCount(): number {
    return fs.readdirSync(`/proc/${this.pid}/fd`).length;
  }

  /** Open sockets among the descriptors. */
  socketCount(): number {
    return fs.readdirSync(`/proc/${this.pid}/fd`).filter((fd) => {
      try {
        return fs.readlinkSync(`/proc/${this.pid}/fd/${fd}`).startsWith('socket:');
      } catch {
        return false;
      }
    }).length;
  }

  /** The sum of a counter family in /metrics (all label sets). */
  async counter(name: string): Promise<number> {
    const answer = await this.http.get('/metrics');
    const text = String(answer.body);
    let sum = 0;
    for (const line of text.split('\n')) {
      if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
    return sum;
  }

  /** Live handles and heap after a GC, from inside the process (needs `handleProbe`). */
  async handles(): Promise<HandleSnapshot> {
    return JSON.parse(await this.probe('snapshot')) as HandleSnapshot;
  }

  /** Starts the in-process CPU profiler (needs `handleProbe`). */
  async startProfile(): Promise<void> {
    await this.probe('profile-start');
  }

  /** Stops the in-process CPU profiler; resolves the .cpuprofile file (needs `handleProbe`). */
  async stopProfile(): Promise<string> {
    await this.probe('profile-stop');
    return `${this.probeFile}.cpuprofile`;
  }

  private get probeFile(): string {
    return path.join(this.opts.workDir, `${this.opts.label}.handles.json`);
  }

  /** Sends one command to the preloaded probe (handle-probe.ts) and resolves its answer. */
  private async probe(command: string): Promise<string> {
    const file = this.probeFile;
    fs.rmSync(file, { force: true });
    fs.writeFileSync(`${file}.cmd`, command);
    this.child.kill('SIGUSR2');
    for (let i = 0; i < 1000; i++) {
      if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8');
      await sleep(10);
    }
    throw new Error(`agent ${this.opts.label} did not answer the probe command ${command}`);
  }

  /** The agent's log so far (last `lines`). */
  logTail(lines = 20): string {
    return tail(path.join(this.opts.workDir, `${this.opts.label}.log`), lines);
  }

  /** SIGTERM and wait for the exit (SIGKILL after `graceMs`); resolves the exit code. */
  async stop(graceMs = 8000): Promise<number | null> {
    this.http.close();
    if (this.exitCode !== undefined) return this.exitCode;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }

  /** The CPU profile written at exit (with `cpuProfile`). */
  get cpuProfileFile(): string {
    return path.join(this.opts.workDir, `${this.opts.label}.cpuprofile`);
  }
}

/**
 * Resident memory of process `pid` by kind of mapping (/proc/<pid>/smaps), MiB: `anon` (V8's heap
 * pages, large malloc blocks, thread stacks), `brk heap` (malloc's main arena), `node binary`,
 * `libraries`, `other`.
 */
export function memoryMapOf(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  let kind = 'other';
  for (const line of fs.readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (header !== null) {
      const name = header[1];
      kind =
        name === ''
          ? 'anon'
          : name === '[heap]'
            ? 'brk heap'
            : name.endsWith('/node')
              ? 'node binary'
              : name.includes('.so')
                ? 'libraries'
                : 'other';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss !== null) out[kind] = (out[kind] ?? 0) + Number(rss[1]) / 1024;
  }
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, Math.round(v * 10) / 10]));
}

/** "node binary 40.6 MiB (…) + anonymous 28.7 MiB (…) + …". */
export function describeMap(map: Record<string, number>): string {
  const what: Record<string, string> = {
    'node binary': "the node executable's own code pages, file-backed and shared, held by a bare Node server too",
    anon: "anonymous: V8's heap and large malloc blocks",
    'brk heap': "malloc's main arena",
    libraries: 'shared libraries',
  };
  return Object.entries(map)
    .filter(([, v]) => v >= 0.5)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v} MiB${what[k] === undefined ? '' : ` (${what[k]})`}`)
    .join(' + ');
}

/** VmRSS of process `pid` in MiB. */
export function procRssMiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status);
  if (kb === null) throw new Error(`no VmRSS for ${pid}`);
  return Number(kb[1]) / 1024;
}

/** Samples `fn` every `everyMs` until stopped; `stop()` resolves the samples. */
export function sampleEvery(everyMs: number, fn: () => number): { stop: () => number[] } {
  const samples: number[] = [];
  const take = (): void => {
    try {
      samples.push(fn());
    } catch {
      // the process went away: keep what we have
    }
  };
  take();
  const timer = setInterval(take, everyMs);
  return {
    stop: () => {
      clearInterval(timer);
      take();
      return samples;
    },
  };
}

/** Prefixes `argv` with setpriv --pdeathsig=KILL when available, so a crashed bench leaves no process behind. */
export function withParentDeathSignal(argv: string[]): [string, string[]] {
  setprivPath ??=
    ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => fs.existsSync(p) && spawnSync(p, ['--help'], { stdio: 'ignore' }).status === 0) ?? '';
  if (setprivPath === '') return [argv[0], argv.slice(1)];
  return [setprivPath, ['--pdeathsig=KILL', '--', ...argv]];
}

let setprivPath: string | undefined;

/** Tracks a child this bench spawned, so it is killed if the bench exits first. */
export function track(child: ChildProcess): void {
  installExitHook();
  children.add(child);
  child.once('exit', () => children.delete(child));
}

function installExitHook(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', () => {
    for (const child of children) child.kill('SIGKILL');
  });
}

function tail(file: string, lines = 20): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
