/**
 * Pods of an etcd StatefulSet, played by local processes as the kubelet would
 * run them: each pod has its own loopback address (127.x.y.z, as a pod has its
 * own IP), the same ports as every other pod, a volume (its data directory),
 * and an emptyDir (the flags file). Starting a pod runs `prepare` (the init
 * container, the built agent as a child process) and then etcd as the etcd
 * container's command does, `sh etcd-start <etcd> <args>`, with the start
 * script prepare installed beside the flags file; the sidecar is a real agent,
 * in this process, whose auto-promotion promotes the pod's learner.
 */
import { ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { RunningAgent, startAgent } from '../../agent/agent';
import { loadConfig } from '../../agent/config/config';
import { flagLine } from '../../agent/prepare/etcd-control';
import { loadPrepareOptions } from '../../agent/prepare/options';
import { installStartScript, startScriptPath } from '../../agent/prepare/start-script';
import { createLogger } from '../../agent/observability/logger';
import { createMetrics } from '../../agent/observability/metrics';
import { findEtcd, findEtcdctl } from '../../scripts/local-cluster';
import { baseFlags, etcdInstall } from '../../scripts/etcd-version';
import { freePorts } from '../../scripts/ports';
import { binCommand } from '../../scripts/bin-command';
import { ChildAgent, LogLine, MAIN_JS } from './child-agent';
import { eventually, patience } from './eventually';

/** Debian's static busybox (package busybox-static), which the agent's image copies into the pod as etcd's shell. */
export const BUSYBOX = '/bin/busybox';
/** util-linux's setpriv, which runs a process as another user (and with a parent-death signal). */
const SETPRIV = '/usr/bin/setpriv';

/** One pod: its stable identity and, while they run, its processes. */
export interface Pod {
  name: string;
  host: string;
  clientURL: string;
  peerURL: string;
  dataDir: string;
  flagsFile: string;
  etcd?: ChildProcess;
  etcdExited?: Promise<void>;
  agent?: RunningAgent;
  /** The sidecar as a real `serve` process (startAgent with `process: true`), which a test can SIGKILL. */
  agentProcess?: ChildAgent;
  /** Every sidecar process this pod has run, in order (their log lines: `agentLines`). */
  agentRuns: ChildAgent[];
  /** Play the kubelet: start the etcd container again when its script exits unasked. */
  restartOnExit?: boolean;
}

/** A user and group to run a pod's containers as, as a pod's `runAsUser`, `runAsGroup` and `fsGroup` (the same group) do. */
export interface RunAs {
  uid: number;
  gid: number;
}

/** What one run of prepare did. */
export interface PrepareRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  lines: LogLine[];
  stderr: string;
}

function bindable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** A StatefulSet's pods on loopback; `destroy` kills everything and removes the volumes. */
export class PodSet {
  readonly pods = new Map<string, Pod>();
  private readonly main = MAIN_JS;
  private readonly etcdBin = findEtcd();

  private constructor(
    readonly root: string,
    readonly ports: { client: number; peer: number; agent: number },
    readonly token: string,
    readonly initialSize: number,
  ) {}

  /** Makes `maxPods` pod identities (etcd-0 …) with free ports on each pod's address; the first `initialSize` are the initial set. */
  static async create(maxPods: number, initialSize: number): Promise<PodSet> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const hosts = Array.from(
        { length: maxPods },
        (_, i) => `127.${100 + Math.floor(Math.random() * 150)}.${Math.floor(Math.random() * 250) + 1}.${i + 1}`,
      );
      const [client, peer, agent] = await freePorts(3, hosts[0]);
      const free = await Promise.all(hosts.flatMap((h) => [client, peer, agent].map((p) => bindable(h, p))));
      if (!free.every(Boolean)) continue;
      const root = fs.mkdtempSync(path.join(os.tmpdir(), 'prepare-pods-'));
      const set = new PodSet(root, { client, peer, agent }, `tok-${path.basename(root)}`, initialSize);
      hosts.forEach((host, i) => {
        const name = `etcd-${i}`;
        set.pods.set(name, {
          name,
          host,
          clientURL: `http://${host}:${client}`,
          peerURL: `http://${host}:${peer}`,
          dataDir: path.join(root, name, 'volume', 'default.etcd'),
          flagsFile: path.join(root, name, 'run', 'etcd-flags.sh'),
          agentRuns: [],
        });
      });
      return set;
    }
    throw new Error('no set of loopback addresses with the same free ports found');
  }

  /** Pod `name`. */
  pod(name: string): Pod {
    const pod = this.pods.get(name);
    if (pod === undefined) throw new Error(`no pod ${name}`);
    return pod;
  }

  /** `--initial-cluster` of the initial set. */
  get initialCluster(): string {
    return [...this.pods.values()]
      .slice(0, this.initialSize)
      .map((p) => `${p.name}=${p.peerURL}`)
      .join(',');
  }

  /** Client URLs of the first `count` pods: the headless Service's addresses. */
  endpoints(count = this.pods.size): string[] {
    return [...this.pods.values()].slice(0, count).map((p) => p.clientURL);
  }

  /**
   * Runs `prepare` once for pod `name`, as the init container would (a fresh emptyDir unless
   * `keepRun`), and kills it with SIGKILL on the first log line `killOn` accepts (or, exactly, at
   * the crash point `crashAt`).
   */
  prepare(
    name: string,
    opts: {
      killOn?: (line: LogLine) => boolean;
      crashAt?: string;
      waitSeconds?: number;
      endpoints?: number;
      keepRun?: boolean;
      /** Run as this user and group (setpriv), as a pod's securityContext does; the test runs as root. */
      as?: RunAs;
      /** More of prepare's variables (a restore asked for), on top of the pod's own. */
      env?: Record<string, string>;
    } = {},
  ): Promise<PrepareRun> {
    const pod = this.pod(name);
    if (opts.keepRun !== true) fs.rmSync(path.dirname(pod.flagsFile), { recursive: true, force: true });
    fs.mkdirSync(path.dirname(pod.dataDir), { recursive: true });
    const env = {
      PATH: process.env.PATH,
      ETCD_AGENT_LISTEN: `${pod.host}:${this.ports.agent}`,
      ETCD_AGENT_MEMBER_NAME: name,
      ETCD_AGENT_ENDPOINTS: this.endpoints(opts.endpoints).join(','),
      ETCD_AGENT_PEER_URL: pod.peerURL,
      ETCD_AGENT_DATA_DIR: pod.dataDir,
      ETCD_AGENT_PREPARE_FLAGS_FILE: pod.flagsFile,
      ETCD_AGENT_INITIAL_CLUSTER: this.initialCluster,
      ETCD_AGENT_INITIAL_CLUSTER_TOKEN: this.token,
      ETCD_AGENT_PREPARE_WAIT_SECONDS: String(opts.waitSeconds ?? 30),
      ETCD_AGENT_LOG_LEVEL: 'info',
      // A crash point (agent/lib/crash-point.ts): prepare kills itself with SIGKILL exactly at that step.
      ...(opts.crashAt === undefined ? {} : { ETCD_AGENT_CRASH_POINTS: opts.crashAt }),
      ...opts.env,
    };
    const [node, argv] = binCommand(this.main, ['prepare']);
    const [cmd, words] = opts.as === undefined ? [node, argv] : [SETPRIV, [...this.asUser(name, opts.as), '--', node, ...argv]];
    const child = spawn(cmd, words, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const run: PrepareRun = { code: null, signal: null, lines: [], stderr: '' };
    let buffer = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      buffer += chunk;
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const text = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        try {
          const line = JSON.parse(text) as LogLine;
          run.lines.push(line);
          if (opts.killOn?.(line) === true) child.kill('SIGKILL');
        } catch {
          // not a log line
        }
      }
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => (run.stderr += chunk));
    return new Promise((resolve) => {
      child.once('exit', (code, signal) => resolve({ ...run, code, signal }));
    });
  }

  /** Runs prepare until it exits 0, as the kubelet restarts a failing init container; answers every run. */
  async prepareUntilReady(
    name: string,
    opts: { waitSeconds?: number; endpoints?: number; attempts?: number; env?: Record<string, string> } = {},
  ): Promise<PrepareRun[]> {
    const runs: PrepareRun[] = [];
    for (let i = 0; i < (opts.attempts ?? 5); i++) {
      const run = await this.prepare(name, opts);
      runs.push(run);
      if (run.code === 0) return runs;
    }
    const last = runs[runs.length - 1];
    throw new Error(`prepare of ${name} never exited 0: ${JSON.stringify(last.lines.slice(-3))} ${last.stderr}`);
  }

  /**
   * Starts pod `name`'s etcd container: the start script prepare installed (installed here as prepare
   * does when the test wrote the flags by hand), run by Debian's static busybox as in the pod, which
   * runs etcd as its child. With `restartOnExit` set on the pod, a script that exits unasked is
   * started again, as the kubelet does.
   */
  startEtcd(name: string, opts: { as?: RunAs } = {}): void {
    const pod = this.pod(name);
    if (pod.etcd !== undefined) throw new Error(`${name}'s etcd already runs`);
    const args = [
      `--name=${name}`,
      `--data-dir=${pod.dataDir}`,
      `--listen-client-urls=${pod.clientURL}`,
      `--advertise-client-urls=${pod.clientURL}`,
      `--listen-peer-urls=${pod.peerURL}`,
      `--initial-advertise-peer-urls=${pod.peerURL}`,
      ...baseFlags(etcdInstall().minor),
    ];
    fs.mkdirSync(path.join(this.root, name), { recursive: true });
    // As in the pod: busybox copied into the start directory as `sh` (the init container does it
    // there), run with no PATH and nothing else of the machine (the etcd image has no shell, no tools).
    const shell = path.join(path.dirname(pod.flagsFile), 'sh');
    if (!fs.existsSync(shell)) {
      if (!fs.existsSync(BUSYBOX))
        throw new Error(
          `${BUSYBOX} is missing: the start script runs under Debian's static busybox, as in the pod (apt-get install busybox-static; scripts/setup.sh and .ci/run install it)`,
        );
      fs.mkdirSync(path.dirname(shell), { recursive: true });
      fs.copyFileSync(BUSYBOX, shell);
      fs.chmodSync(shell, 0o755);
    }
    const log = fs.openSync(path.join(this.root, name, 'etcd.log'), 'a');
    try {
      // As the harness does: with setpriv, the kernel kills etcd when its parent (the script) dies, even
      // by SIGKILL. etcd's binary, as the script is given it, is a wrapper (run by the same busybox)
      // that notes each start's arguments (etcdStarts) and passes the script's `--version` on.
      const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((f) => fs.existsSync(f));
      const etcdBin = opts.as === undefined ? this.etcdBin : this.reachableEtcd();
      const etcd = setpriv === undefined ? etcdBin : `${setpriv} --pdeathsig=KILL -- ${etcdBin}`;
      const wrapper = path.join(this.root, name, 'etcd-wrapper.sh');
      const starts = path.join(this.root, name, 'etcd-starts.log');
      fs.writeFileSync(wrapper, `#!${shell}\n[ "$1" = --version ] || echo "$*" >> ${starts}\nexec ${etcd} "$@"\n`, { mode: 0o755 });
      const script = fs.existsSync(startScriptPath(pod.flagsFile))
        ? startScriptPath(pod.flagsFile)
        : installStartScript(pod.flagsFile, pod.dataDir);
      const argv = [shell, script, wrapper, ...args];
      const user = opts.as === undefined ? [] : this.asUser(name, opts.as);
      const [cmd, ...rest] = setpriv === undefined ? argv : [setpriv, ...user, '--pdeathsig=KILL', '--', ...argv];
      // Nothing of the machine's environment, as in the pod, but its CPU limit's GOMAXPROCS (etcd-environment.js).
      const env = process.env.GOMAXPROCS === undefined ? {} : { GOMAXPROCS: process.env.GOMAXPROCS };
      const child = spawn(cmd, rest, { env, stdio: ['ignore', log, log], detached: true });
      pod.etcd = child;
      pod.etcdExited = new Promise((resolve) =>
        child.once('exit', () => {
          if (pod.etcd === child) {
            pod.etcd = undefined;
            if (pod.restartOnExit === true)
              setTimeout(() => pod.restartOnExit === true && pod.etcd === undefined && this.startEtcd(name), 500);
          }
          resolve();
        }),
      );
    } finally {
      fs.closeSync(log);
    }
  }

  /**
   * setpriv's flags that run a process as `as` (its group also its only supplementary group, as a
   * pod's fsGroup), after making what the harness keeps for pod `name` reachable to that user: the
   * temporary root (made 0700), the pod's directory and the wrapper's log of starts in it.
   */
  private asUser(name: string, as: RunAs): string[] {
    fs.chmodSync(this.root, 0o755);
    fs.mkdirSync(path.join(this.root, name), { recursive: true });
    fs.chownSync(path.join(this.root, name), as.uid, as.gid);
    const starts = path.join(this.root, name, 'etcd-starts.log');
    if (fs.existsSync(starts)) fs.chownSync(starts, as.uid, as.gid);
    return [`--reuid=${as.uid}`, `--regid=${as.gid}`, `--groups=${as.gid}`];
  }

  /** etcd's binary copied where any user may run it (the build cache may sit in root's home). */
  private reachableEtcd(): string {
    const copy = path.join(this.root, 'bin', 'etcd');
    if (!fs.existsSync(copy)) {
      fs.mkdirSync(path.dirname(copy), { recursive: true, mode: 0o755 });
      fs.copyFileSync(this.etcdBin, copy);
      fs.chmodSync(copy, 0o755);
    }
    return copy;
  }

  /** Stops pod `name`'s etcd container (SIGTERM to the script, or SIGKILL to all of it when `kill`) and waits for it to exit; no restart follows. */
  async stopEtcd(name: string, kill = false): Promise<void> {
    const pod = this.pod(name);
    pod.restartOnExit = false;
    const child = pod.etcd;
    if (child === undefined) return;
    const signal = (sig: NodeJS.Signals): void => {
      try {
        process.kill(-(child.pid as number), sig);
      } catch {
        child.kill(sig);
      }
    };
    signal(kill ? 'SIGKILL' : 'SIGTERM');
    const timer = setTimeout(() => signal('SIGKILL'), 5000);
    await pod.etcdExited;
    clearTimeout(timer);
  }

  /** The pid of pod `name`'s etcd itself (the start script's child), from the script's state file. */
  etcdPid(name: string): number | undefined {
    try {
      const m = /^running (\d+)/.exec(fs.readFileSync(path.join(path.dirname(this.pod(name).flagsFile), 'etcd-state'), 'utf8'));
      return m === null ? undefined : Number(m[1]);
    } catch {
      return undefined;
    }
  }

  /** The arguments of each start of pod `name`'s etcd, oldest first (from the start script's wrapper). */
  etcdStarts(name: string): string[] {
    try {
      return fs
        .readFileSync(path.join(this.root, name, 'etcd-starts.log'), 'utf8')
        .split('\n')
        .filter(Boolean);
    } catch {
      return [];
    }
  }

  /** Sends `signal` to pod `name`'s etcd process itself (SIGSTOP freezes it, SIGCONT thaws it, SIGKILL kills it and its script then exits). */
  signalEtcd(name: string, signal: 'SIGSTOP' | 'SIGCONT' | 'SIGKILL'): void {
    const pid = this.etcdPid(name);
    if (pid === undefined) throw new Error(`${name}'s etcd does not run`);
    process.kill(pid, signal);
  }

  /**
   * Starts pod `name`'s sidecar on the pod's agent port, with prepare's settings as kube-inject gives
   * them (so it can restart and prepare its etcd again) and `env` on top: a real agent in this
   * process (its auto-promotion promotes the pod's learner), or with `process: true` the built bin as
   * a child process (`serve`), which a test can SIGKILL (`killAgent`, or a crash point in `env`)
   * and start again.
   */
  async startAgent(name: string, env: Record<string, string> = {}, opts: { process?: boolean } = {}): Promise<void> {
    const pod = this.pod(name);
    const all = {
      ETCD_AGENT_LISTEN: `${pod.host}:${this.ports.agent}`,
      ETCD_AGENT_ENDPOINTS: this.endpoints().join(','),
      ETCD_AGENT_LOCAL_ENDPOINT: pod.clientURL,
      ETCD_AGENT_MEMBER_NAME: name,
      ETCD_AGENT_PEER_URL: pod.peerURL,
      ETCD_AGENT_DATA_DIR: pod.dataDir,
      ETCD_AGENT_PREPARE_FLAGS_FILE: pod.flagsFile,
      ETCD_AGENT_INITIAL_CLUSTER: this.initialCluster,
      ETCD_AGENT_INITIAL_CLUSTER_TOKEN: this.token,
      ...env,
    };
    if (opts.process === true) {
      pod.agentProcess = await ChildAgent.start(this.main, all, 60_000);
      pod.agentRuns.push(pod.agentProcess);
      return;
    }
    const { config } = loadConfig(all);
    const prepare = loadPrepareOptions(all, []);
    const level = process.env.MEMBERSHIP_TEST_LOG;
    const logger = level === undefined ? createLogger({ silent: true }) : createLogger({ level, stream: process.stderr });
    pod.agent = await startAgent(config, { logger, metrics: createMetrics({ defaultMetrics: false }), prepare });
  }

  /** Stops pod `name`'s sidecar (SIGTERM to its process, which stops cleanly). */
  async stopAgent(name: string): Promise<void> {
    const pod = this.pod(name);
    await pod.agent?.stop(1000);
    pod.agent = undefined;
    await pod.agentProcess?.kill('SIGTERM');
    pod.agentProcess = undefined;
  }

  /** The log lines of every sidecar process pod `name` has run, in order. */
  agentLines(name: string): LogLine[] {
    return this.pod(name).agentRuns.flatMap((a) => a.lines);
  }

  /** Kills pod `name`'s sidecar process with SIGKILL, as a crash or an OOM kill would. */
  async killAgent(name: string): Promise<void> {
    const pod = this.pod(name);
    await pod.agentProcess?.kill('SIGKILL');
    pod.agentProcess = undefined;
  }

  /** Pod `name`'s etcd log so far (all its runs). */
  etcdLog(name: string): string {
    try {
      return fs.readFileSync(path.join(this.root, name, 'etcd.log'), 'utf8');
    } catch {
      return '';
    }
  }

  /** Writes pod `name`'s flags file by hand, as prepare would, for tests of etcd's own behaviour. */
  writeFlags(name: string, state: 'new' | 'existing', initialCluster = this.initialCluster): void {
    const file = this.pod(name).flagsFile;
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(
      file,
      [`--initial-cluster=${initialCluster}`, `--initial-cluster-state=${state}`, `--initial-cluster-token=${this.token}`]
        .map((f) => `${flagLine(f)}\n`)
        .join(''),
    );
  }

  /** Resolves once pod `name`'s etcd has exited (e.g. a panic at start), within `timeoutMs` of patience. */
  async etcdExit(name: string, timeoutMs = 15_000): Promise<void> {
    const waitMs = patience(timeoutMs);
    const exited = this.pod(name).etcdExited;
    if (exited === undefined) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      exited,
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${name}'s etcd still runs after ${waitMs} ms`)), waitMs))),
    ]);
    clearTimeout(timer);
  }

  /** Whether the pod's etcd answers /health with "true". */
  async healthy(name: string): Promise<boolean> {
    try {
      const res = await fetch(`${this.pod(name).clientURL}/health`, { signal: AbortSignal.timeout(1000) });
      return ((await res.json()) as { health?: string }).health === 'true';
    } catch {
      return false;
    }
  }

  /** etcdctl (API v3) against the given pods' client URLs; resolves to its stdout. */
  etcdctl(args: string[], pods: string[]): Promise<string> {
    const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ETCD'))), ETCDCTL_API: '3' };
    const argv = [`--endpoints=${pods.map((p) => this.pod(p).clientURL).join(',')}`, ...args];
    return new Promise((resolve, reject) => {
      execFile(findEtcdctl(), argv, { env, timeout: 10_000 }, (err, stdout, stderr) => {
        if (err) reject(new Error(`etcdctl ${args.join(' ')}: ${String(stderr).trim() || err.message}`));
        else resolve(String(stdout));
      });
    });
  }

  /**
   * Starts the pods `names` as a StatefulSet's pods start: each init container (prepare) run again
   * until it exits 0, etcd under its start script (restarted when it exits, as the kubelet does), then
   * the sidecar agents as processes with `agentEnv`. Answers the cluster id each pod's etcd reports.
   */
  async startAll(names: string[], agentEnv: Record<string, string>): Promise<Record<string, string>> {
    await Promise.all(names.map((n) => this.prepareUntilReady(n, { waitSeconds: 60, attempts: 2 })));
    for (const n of names) {
      this.pod(n).restartOnExit = true;
      this.startEtcd(n);
    }
    await Promise.all(names.map((n) => eventually(async () => expect(await this.healthy(n)).toBe(true), { within: 30_000, every: 200 })));
    await Promise.all(names.map((n) => this.startAgent(n, agentEnv, { process: true })));
    return this.clusterIds(names);
  }

  /** The cluster id each named pod's etcd reports about itself (hex), by pod. */
  async clusterIds(pods: string[]): Promise<Record<string, string>> {
    const ids: Record<string, string> = {};
    for (const name of pods) {
      const out = await this.etcdctl(['endpoint', 'status', '-w', 'json'], [name]);
      const id = /"cluster_id":(\d+)/.exec(out)?.[1];
      if (id === undefined) throw new Error(`no cluster id in ${out}`);
      ids[name] = BigInt(id).toString(16);
    }
    return ids;
  }

  /** Kills every process and removes the volumes. */
  async destroy(): Promise<void> {
    for (const pod of this.pods.values()) {
      await this.stopAgent(pod.name).catch(() => undefined);
      await this.stopEtcd(pod.name, true);
    }
    if (!process.env.LOCAL_ETCD_KEEP) fs.rmSync(this.root, { recursive: true, force: true });
  }
}
