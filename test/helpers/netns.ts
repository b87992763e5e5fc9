/**
 * Pods as Linux network namespaces, for tests where each pod needs its own loopback and its own
 * ports (kbagent's HTTP actions call 127.0.0.1:3501 as written, so every pod's agent must be alone
 * on its loopback): one namespace per pod, each with `lo` and an `eth0` veth to a bridge in a hub
 * namespace of the same run, addresses from 198.18.0.0/15 (RFC 2544's benchmark range) set only
 * inside those namespaces, and a hosts file per namespace (/etc/netns/<ns>/hosts, which
 * `ip netns exec` mounts over /etc/hosts) so pod FQDNs resolve to pod addresses.
 *
 * Invariant: every name a run makes starts with `kbe<pid>x<n>-` (namespaces, /etc/netns folders);
 * `destroy()` kills what the run started in them and deletes them all, and runs at process exit as
 * well; a later run deletes what a run whose process is gone left behind. Nothing is made in the
 * root namespace. Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2.
 */
import { ChildProcess, execFile, execFileSync, spawn, type SpawnOptions } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const PREFIX = 'kbe';
const NETNS_ETC = '/etc/netns';
let runs = 0;

/** `ip …`, rejecting with its stderr. */
function ip(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('ip', args, { timeout: 20_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`ip ${args.join(' ')} failed: ${String(stderr).trim() || err.message}`));
      else resolve(String(stdout));
    });
  });
}

/** Several `ip` commands in one process (`ip [-n NS] -batch -`), stopping at the first that fails. */
function ipBatch(commands: string[][], ns?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = execFile('ip', [...(ns === undefined ? [] : ['-n', ns]), '-batch', '-'], { timeout: 20_000 }, (err, _stdout, stderr) => {
      if (err) reject(new Error(`ip -batch failed: ${String(stderr).trim() || err.message}`));
      else resolve();
    });
    child.stdin?.end(`${commands.map((c) => c.join(' ')).join('\n')}\n`);
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Deletes namespace `ns` (after SIGKILLing the processes still in it) and its /etc/netns folder, synchronously. */
function deleteNamespaceSync(ns: string): void {
  try {
    const pids = execFileSync('ip', ['netns', 'pids', ns], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    for (const pid of pids.split(/\s+/).filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone already
      }
    }
  } catch {
    // no such namespace
  }
  try {
    execFileSync('ip', ['netns', 'delete', ns], { stdio: 'ignore' });
  } catch {
    // deleted already
  }
  fs.rmSync(path.join(NETNS_ETC, ns), { recursive: true, force: true });
}

/** The namespaces of earlier runs whose process is gone (a run killed before it could clean up). */
function sweepAbandoned(): void {
  let names: string[] = [];
  try {
    names = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
      .split('\n')
      .map((l) => l.split(' ')[0]);
  } catch {
    return;
  }
  for (const name of names) {
    const owner = new RegExp(`^${PREFIX}(\\d+)x\\d+-`).exec(name);
    if (owner !== null && !alive(Number(owner[1]))) deleteNamespaceSync(name);
  }
}

/** One network namespace of the run: a pod, or the caller standing for a controller. */
export interface Netns {
  /** The namespace's name (`ip netns exec <name>`). */
  name: string;
  /** Its address on the run's bridge. */
  ip: string;
}

/** The namespaces of one test run, their bridge, their hosts files and the processes started in them. */
export class PodNetwork {
  readonly prefix: string;
  /** The /24 of 198.18.0.0/15 this run's addresses come from, e.g. `198.18.42`. */
  readonly subnet: string;
  private readonly hub: string;
  private readonly namespaces: Netns[] = [];
  private readonly children = new Set<ChildProcess>();
  private readonly onExit = (): void => this.destroySync();
  private destroyed = false;

  private constructor(id: number) {
    this.prefix = `${PREFIX}${process.pid}x${id}`;
    this.subnet = `198.18.${(process.pid % 250) + 1}`;
    this.hub = `${this.prefix}-hub`;
  }

  /** A new run: its hub namespace with the bridge, after deleting what dead runs left behind. */
  static async create(): Promise<PodNetwork> {
    sweepAbandoned();
    const network = new PodNetwork(++runs);
    process.once('exit', network.onExit);
    await ip(['netns', 'add', network.hub]);
    await ip(['-n', network.hub, 'link', 'add', 'br0', 'type', 'bridge']);
    await ip(['-n', network.hub, 'link', 'set', 'br0', 'up']);
    return network;
  }

  /** The address of host number `n` (2–254) of this run. */
  address(n: number): string {
    return `${this.subnet}.${n}`;
  }

  /** A namespace `<prefix>-<name>` with `lo` up and `eth0` at `address` on the run's bridge. */
  async add(name: string, address: string): Promise<Netns> {
    return (await this.addAll([{ name, address }]))[0];
  }

  /** Several namespaces as `add` makes them, with a few `ip` processes (one per namespace, two for all). */
  async addAll(wanted: Array<{ name: string; address: string }>): Promise<Netns[]> {
    const made = wanted.map((w) => ({ name: `${this.prefix}-${w.name}`, ip: w.address }));
    const ports = made.map((_, i) => `p${this.namespaces.length + i}`);
    // Known before they exist, so that a failure half way still deletes the ones made.
    this.namespaces.push(...made);
    await ipBatch(
      made.flatMap((ns, i) => [
        ['netns', 'add', ns.name],
        ['link', 'add', 'eth0', 'netns', ns.name, 'type', 'veth', 'peer', 'name', ports[i], 'netns', this.hub],
      ]),
    );
    await Promise.all([
      ipBatch(
        ports.map((port) => ['link', 'set', port, 'master', 'br0', 'up']),
        this.hub,
      ),
      ...made.map((ns) =>
        ipBatch(
          [
            ['link', 'set', 'lo', 'up'],
            ['addr', 'add', `${ns.ip}/24`, 'dev', 'eth0'],
            ['link', 'set', 'eth0', 'up'],
          ],
          ns.name,
        ),
      ),
    ]);
    return made;
  }

  /**
   * Writes `/etc/hosts` of every namespace of the run: localhost, then each address with its names.
   * Written in place (the same inode), so processes already started see it too.
   */
  writeHosts(entries: Array<{ ip: string; names: string[] }>): void {
    const text = ['127.0.0.1 localhost', '::1 localhost ip6-localhost', ...entries.map((e) => `${e.ip} ${e.names.join(' ')}`), ''].join(
      '\n',
    );
    for (const ns of this.namespaces) {
      const dir = path.join(NETNS_ETC, ns.name);
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'hosts'), text);
    }
  }

  /** Starts `command args` inside `ns` (`ip netns exec` execs it: the child's pid is the command's). */
  spawn(ns: Netns, command: string, args: string[], options: SpawnOptions): ChildProcess {
    const child = spawn('ip', ['netns', 'exec', ns.name, command, ...args], options);
    this.children.add(child);
    child.once('exit', () => this.children.delete(child));
    return child;
  }

  /** Runs `command args` inside `ns` to its end; resolves with its stdout, rejects with its stderr. */
  run(ns: Netns, command: string, args: string[], env: NodeJS.ProcessEnv = process.env, timeoutMs = 15_000): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(
        'ip',
        ['netns', 'exec', ns.name, command, ...args],
        { env, timeout: timeoutMs, maxBuffer: 8 << 20 },
        (err, stdout, stderr) => {
          if (err) reject(new Error(`${command} ${args.join(' ')} in ${ns.name} failed: ${String(stderr).trim() || err.message}`));
          else resolve(String(stdout));
        },
      );
    });
  }

  /** Kills every process the run started (SIGKILL) and deletes its namespaces and hosts files. */
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    const exits = [...this.children].map(
      (c) => new Promise<void>((resolve) => (c.exitCode !== null || c.signalCode !== null ? resolve() : c.once('exit', () => resolve()))),
    );
    for (const child of this.children) child.kill('SIGKILL');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(exits), new Promise((resolve) => (timer = setTimeout(resolve, 5000)))]);
    clearTimeout(timer);
    this.destroySync();
  }

  private destroySync(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    process.removeListener('exit', this.onExit);
    for (const child of this.children) child.kill('SIGKILL');
    for (const ns of [...this.namespaces, { name: this.hub, ip: '' }]) deleteNamespaceSync(ns.name);
    try {
      fs.rmdirSync(NETNS_ETC); // only when no other run has a folder there
    } catch {
      // not empty, or gone
    }
  }
}
