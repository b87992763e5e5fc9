/**
 * One pod of the KubeBlocks etcd Component (deploy/kubeblocks-componentdefinition.yaml) in its own
 * network namespace (netns.ts): a real etcd, the agent sidecar (the built bin,
 * dist/bin/etcd-lifecycle-agent.js, on Node 24 as the image runs it) and the real kbagent, each
 * started inside the namespace with the environment KubeBlocks gives its container. etcd restarts
 * after it exits until it is stopped, as a pod's container does (every 0.5 s here, not the kubelet's
 * back-off). Files (data, TLS, logs) live in the pod's own folder; the definition's TLS mount path is
 * mapped to its `tls/` subfolder.
 */
import { type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { binCommand } from '../../scripts/bin-command';
import type { EtcdInstall } from '../../scripts/etcd-version';
import { MAIN_JS } from './built-agent';
import { KbAgentLog } from './kbagent-process';
import { patience } from './eventually';
import type { Netns, PodNetwork } from './netns';

/** The pod's processes' binaries. */
export interface PodBinaries {
  etcd: EtcdInstall;
  node24: string;
  kbagent: string;
}

/** The TLS files KubeBlocks mounts (the definition's tls: ca.pem, cert.pem, key.pem). */
export interface PodTls {
  ca: string;
  cert: string;
  key: string;
}

const TLS_MOUNT = '/etc/pki/tls';

/** A pod: its namespace, names, folder and processes. */
export class NetnsPod {
  readonly kbLog = new KbAgentLog();
  readonly agentLines: Array<Record<string, unknown>> = [];
  private etcdChild?: ChildProcess;
  private etcdWanted = false;
  private etcdRestarts = 0;
  private agentChild?: ChildProcess;
  private kbChild?: ChildProcess;

  constructor(
    readonly network: PodNetwork,
    readonly ns: Netns,
    readonly name: string,
    readonly fqdn: string,
    readonly dir: string,
    private readonly bins: PodBinaries,
    readonly tls: boolean,
  ) {
    fs.mkdirSync(path.join(dir, 'data'), { recursive: true });
  }

  /** The pod's address. */
  get ip(): string {
    return this.ns.ip;
  }

  /** `http` or `https`, as the Component's TLS says. */
  get scheme(): string {
    return this.tls ? 'https' : 'http';
  }

  /** Puts the Component's TLS files where the definition mounts them (the pod's `tls/`). */
  mountTls(files: PodTls): void {
    const dir = path.join(this.dir, 'tls');
    fs.mkdirSync(dir, { recursive: true });
    fs.copyFileSync(files.ca, path.join(dir, 'ca.pem'));
    fs.copyFileSync(files.cert, path.join(dir, 'cert.pem'));
    fs.copyFileSync(files.key, path.join(dir, 'key.pem'));
  }

  /** A container path under the definition's TLS mount, as a path of the pod's folder. */
  mapPath(value: string): string {
    return value.split(TLS_MOUNT).join(path.join(this.dir, 'tls'));
  }

  /** etcdctl's TLS flags for this pod's certificates. */
  etcdctlTls(): string[] {
    const tls = path.join(this.dir, 'tls');
    return this.tls ? ['--cacert', path.join(tls, 'ca.pem'), '--cert', path.join(tls, 'cert.pem'), '--key', path.join(tls, 'key.pem')] : [];
  }

  /** etcd's flags as the addon's configuration sets them (name, URLs from the pod FQDN, TLS with client certificates). */
  private etcdArgs(initialCluster: string, state: 'new' | 'existing', token: string): string[] {
    const s = this.scheme;
    const tls = path.join(this.dir, 'tls');
    const files = (prefix: string): string[] => [
      `--${prefix}trusted-ca-file=${path.join(tls, 'ca.pem')}`,
      `--${prefix}cert-file=${path.join(tls, 'cert.pem')}`,
      `--${prefix}key-file=${path.join(tls, 'key.pem')}`,
      `--${prefix}client-cert-auth`,
    ];
    return [
      `--name=${this.name}`,
      `--data-dir=${path.join(this.dir, 'data')}`,
      `--listen-client-urls=${s}://0.0.0.0:2379`,
      `--advertise-client-urls=${s}://${this.fqdn}:2379`,
      `--listen-peer-urls=${s}://0.0.0.0:2380`,
      `--initial-advertise-peer-urls=${s}://${this.fqdn}:2380`,
      `--initial-cluster=${initialCluster}`,
      `--initial-cluster-state=${state}`,
      `--initial-cluster-token=${token}`,
      '--log-level=warn',
      ...(this.tls ? [...files(''), ...files('peer-')] : []),
    ];
  }

  /** Starts etcd, restarting it each time it exits until `stopEtcd`. */
  startEtcd(initialCluster: string, state: 'new' | 'existing', token: string): void {
    this.etcdWanted = true;
    const args = this.etcdArgs(initialCluster, state, token);
    const log = fs.openSync(path.join(this.dir, 'etcd.log'), 'a');
    const start = (): void => {
      const child = this.network.spawn(this.ns, this.bins.etcd.etcd, args, {
        env: { PATH: process.env.PATH, ...(process.env.GOMAXPROCS === undefined ? {} : { GOMAXPROCS: process.env.GOMAXPROCS }) },
        stdio: ['ignore', log, log],
      });
      this.etcdChild = child;
      child.once('exit', () => {
        if (this.etcdChild === child) this.etcdChild = undefined;
        if (!this.etcdWanted) return;
        this.etcdRestarts++;
        setTimeout(() => {
          if (this.etcdWanted && this.etcdChild === undefined) start();
        }, 500);
      });
    };
    start();
  }

  /** How often etcd exited and was started again. */
  get etcdRestartCount(): number {
    return this.etcdRestarts;
  }

  /** SIGKILLs etcd and keeps it down. */
  async stopEtcd(): Promise<void> {
    this.etcdWanted = false;
    const child = this.etcdChild;
    if (child === undefined) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  /** Starts the agent sidecar (the built bin on Node 24) with `env`; resolves once it listens. */
  async startAgent(env: Record<string, string>): Promise<void> {
    const [node, argv] = binCommand(MAIN_JS, ['serve'], this.bins.node24);
    const mapped = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, this.mapPath(v)]));
    const log = fs.openSync(path.join(this.dir, 'agent.log'), 'a');
    const child = this.network.spawn(this.ns, node, argv, { env: { ...mapped, PATH: process.env.PATH }, stdio: ['ignore', 'pipe', log] });
    this.agentChild = child;
    let buffer = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      fs.appendFileSync(path.join(this.dir, 'agent.log'), chunk);
      buffer += chunk;
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        try {
          this.agentLines.push(JSON.parse(buffer.slice(0, nl)) as Record<string, unknown>);
        } catch {
          // not a log line
        }
        buffer = buffer.slice(nl + 1);
      }
    });
    await this.until(() => this.agentLines.some((l) => l.message === 'listening'), child, 'the agent', 15_000);
  }

  /** Starts kbagent with `env` on the ports KubeBlocks gives it; resolves once both its servers started. */
  async startKbAgent(env: Record<string, string>, ports: { http: number; streaming: number }): Promise<void> {
    const home = path.join(this.dir, 'kbagent-home');
    fs.mkdirSync(home, { recursive: true });
    // KubeBlocks runs `kbagent --port <http> --streaming-port <streaming>`; JSON logs are only easier to read here.
    const args = ['--port', String(ports.http), '--streaming-port', String(ports.streaming), '--zap-encoder=json'];
    const child = this.network.spawn(this.ns, this.bins.kbagent, args, {
      env: { ...env, HOME: home, PATH: process.env.PATH },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.kbChild = child;
    this.kbLog.attach(child);
    const kbFile = path.join(this.dir, 'kbagent.log');
    for (const stream of [child.stdout, child.stderr]) stream?.on('data', (c: string) => fs.appendFileSync(kbFile, c));
    await this.until(() => this.kbLog.lines.some((l) => l.msg === 'starting the streaming server'), child, 'kbagent', 15_000);
  }

  /** Waits until `done()`, at most `timeoutMs` of patience (TEST_TIME_SCALE lengthens it); fails at once if `child` exits first. */
  private async until(done: () => boolean, child: ChildProcess, what: string, timeoutMs: number): Promise<void> {
    const waitMs = patience(timeoutMs);
    const deadline = Date.now() + waitMs;
    while (!done()) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`${what} of ${this.name} exited (${child.exitCode ?? child.signalCode}); see ${this.dir}`);
      if (Date.now() > deadline) throw new Error(`${what} of ${this.name} did not start within ${waitMs} ms; see ${this.dir}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  /** Stops every process of the pod (SIGKILL), as a deleted pod's. */
  async stop(): Promise<void> {
    await this.stopEtcd();
    for (const child of [this.agentChild, this.kbChild]) {
      if (child === undefined || child.exitCode !== null || child.signalCode !== null) continue;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }
  }
}
