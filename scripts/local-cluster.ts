import { ChildProcess, execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import type https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { request, RequestTimeout } from '../agent/lib/http-request';
import type { Member as AgentMember } from '../agent/proto/types';
import { baseFlags, etcdInstall, EtcdInstall, isExecutable } from './etcd-version';
import { freePorts } from './ports';

/** Whether a member's etcd process runs, is frozen by SIGSTOP, or is not running. */
export type MemberState = 'running' | 'paused' | 'stopped';

/** A member's name and the URLs it listens on and advertises. */
export interface MemberSpec {
  readonly name: string;
  readonly clientURL: string;
  readonly peerURL: string;
}

/** A snapshot of one member of a {@link LocalEtcdCluster}. */
export interface LocalMember extends MemberSpec {
  readonly dataDir: string;
  readonly logFile: string;
  readonly pid: number | undefined;
  readonly state: MemberState;
  /** The etcd version its process runs (or last ran), e.g. `3.6.16`. */
  readonly version: string;
}

/** A member as etcdctl's member list reports it: the agent's own member shape, id in hex. */
export type ListedMember = AgentMember;

/** How {@link LocalEtcdCluster.start} builds the cluster. */
export interface LocalClusterOptions {
  size: number;
  /** The etcd every member starts with; default `ETCD_VERSION`'s (scripts/etcd-version.ts). */
  etcd?: EtcdInstall;
  /** Member name prefix: members are `<name>-0`, `<name>-1`, …; default `etcd`. */
  name?: string;
  /** Directory under which a fresh run directory is created; default the OS temp dir. */
  dataRoot?: string;
  host?: string;
  /** Where `<member>.log` files go; default the run directory (removed by destroy). */
  logDir?: string;
  /** Appended to every member's flags; a repeated flag wins over the defaults (Go's flag package keeps the last). */
  extraArgs?: string[];
  /** Per-member flags, the hook for TLS or auth (certificate paths per member). */
  memberArgs?: (member: MemberSpec & { dataDir: string }) => string[];
  /** Added to the environment of etcd processes (inherited ETCD_* variables are dropped). */
  env?: NodeJS.ProcessEnv;
  startTimeoutMs?: number;
  /** TLS on the client URLs (https; peers stay http), with client-certificate auth when a client pair is given. */
  clientTls?: ClientTls;
}

/**
 * PEM files of a TLS cluster: etcd serves `serverCert`/`serverKey` and trusts `ca`; the harness
 * (health checks, etcdctl) trusts `ca` and presents `clientCert`/`clientKey`, which etcd then requires.
 */
export interface ClientTls {
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert?: string;
  clientKey?: string;
}

/**
 * What a member's `/health` said: `ok` (`"health":"true"`), `unhealthy` (an answer that is not),
 * `refused` (the connection refused or reset: nothing listens), `timeout` (no answer within the
 * deadline: a member that may be frozen, or only slow), `error` (anything else, e.g. TLS).
 */
export interface HealthCheck {
  verdict: 'ok' | 'unhealthy' | 'refused' | 'timeout' | 'error';
  detail: string;
}

/** Options for starting one more member process. */
export interface StartMemberOptions {
  wait?: boolean;
  timeoutMs?: number;
  /**
   * The etcd this member runs from now on (its flags are that version's `baseFlags`), on the same
   * data directory: how a rolling upgrade replaces the binary. Default: the one it ran last.
   */
  etcd?: EtcdInstall;
  /**
   * Words run in front of etcd for this start only, etcd's path and arguments following them: e.g.
   * `['/bin/sh', '-c', script]`, where the script sees etcd as `$0` and its arguments as `"$@"`, as
   * the etcd container's command does in kube-inject's pods.
   */
  launcher?: string[];
  /** Flags added after all others for this start only (etcd keeps the last of a repeated flag). */
  args?: string[];
}

interface Member extends MemberSpec {
  etcd: EtcdInstall;
  dataDir: string;
  logFile: string;
  state: MemberState;
  child?: ChildProcess;
  exited: Promise<void>;
  lastExit?: string;
  initialCluster: string;
}

const DEFAULT_TIMEOUT_MS = 20_000;
const live = new Set<LocalEtcdCluster>();
let exitHookInstalled = false;

/** A real etcd cluster of local processes on loopback, for integration tests, demos and benchmarks. */
export class LocalEtcdCluster {
  private readonly byName = new Map<string, Member>();
  private readonly reserved = new Map<string, MemberSpec>();
  private readonly token = `lc-${randomUUID()}`;
  private destroying?: Promise<void>;
  /** `user:password` etcdctl authenticates with, once the cluster has auth on (see `authenticateAs`). */
  private etcdctlUser?: string;

  private constructor(
    /** The etcd members start with (ETCD_VERSION, scripts/etcd-version.ts); its etcdctl is the harness's. */
    readonly etcd: EtcdInstall,
    private readonly root: string,
    private readonly opts: LocalClusterOptions,
  ) {}

  /** Starts `size` members and resolves once every one answers /health with `"true"`. */
  static async start(opts: LocalClusterOptions): Promise<LocalEtcdCluster> {
    if (!Number.isInteger(opts.size) || opts.size < 1) throw new Error(`size must be a positive integer, got ${opts.size}`);
    const install = opts.etcd ?? etcdInstall();
    const base = opts.dataRoot ?? os.tmpdir();
    await fs.promises.mkdir(base, { recursive: true });
    for (let attempt = 1; ; attempt++) {
      const root = await fs.promises.mkdtemp(path.join(base, `${opts.name ?? 'etcd'}-cluster-`));
      const cluster = new LocalEtcdCluster(install, root, opts);
      try {
        await cluster.boot();
        return cluster;
      } catch (err) {
        await cluster.destroy();
        // A port found free may be taken by someone else before etcd binds it; new ports fix that.
        if (attempt >= 3 || !String(err).includes('address already in use')) throw err;
      }
    }
  }

  /** Snapshots of all members, in creation order. */
  get members(): ReadonlyArray<LocalMember> {
    return [...this.byName.values()].map(snapshot);
  }

  /** The snapshot of member `name`; throws for an unknown name. */
  member(name: string): LocalMember {
    return snapshot(this.get(name));
  }

  /** Client URLs of members whose process exists (running or paused). */
  clientURLs(): string[] {
    return [...this.byName.values()].filter((m) => m.state !== 'stopped').map((m) => m.clientURL);
  }

  /**
   * Stops a member gracefully (SIGTERM, SIGKILL after `graceMs`) and waits for its exit. A leader first
   * hands leadership over, which takes up to ~6 s when the other members are stopping too.
   */
  async stop(name: string, graceMs = 10_000): Promise<void> {
    const m = this.get(name);
    if (m.state === 'stopped') return;
    signal(m, 'SIGTERM');
    if (m.state === 'paused') signal(m, 'SIGCONT'); // a stopped process only acts on SIGTERM once continued
    const timer = setTimeout(() => signal(m, 'SIGKILL'), graceMs);
    await m.exited;
    clearTimeout(timer);
  }

  /** Kills a member (SIGKILL), as a crash or a lost node would, and waits for its exit. */
  async kill(name: string): Promise<void> {
    const m = this.get(name);
    if (m.state === 'stopped') return;
    signal(m, 'SIGKILL');
    await m.exited;
  }

  /** Freezes a member (SIGSTOP): its sockets stay open but nothing answers, like a hung node. */
  pause(name: string): void {
    const m = this.get(name);
    if (m.state !== 'running') throw new Error(`cannot pause ${name}: it is ${m.state}`);
    signal(m, 'SIGSTOP');
    awaitStopState(m.child?.pid, true);
    m.state = 'paused';
  }

  /** Continues a paused member (SIGCONT). */
  resume(name: string): void {
    const m = this.get(name);
    if (m.state !== 'paused') throw new Error(`cannot resume ${name}: it is ${m.state}`);
    signal(m, 'SIGCONT');
    awaitStopState(m.child?.pid, false);
    m.state = 'running';
  }

  /**
   * Starts a member again on its existing data dir (stopping it first if needed), by default waiting
   * until healthy; `opts.etcd` swaps its binary (a rolling upgrade or a downgrade attempt).
   */
  async restart(name: string, opts: StartMemberOptions = {}): Promise<LocalMember> {
    const m = this.get(name);
    await this.stop(name);
    if (opts.etcd !== undefined) m.etcd = opts.etcd;
    this.spawnMember(m, 'existing', opts.launcher, opts.args);
    if (opts.wait ?? true) await this.waitHealthy(name, opts.timeoutMs);
    return snapshot(m);
  }

  /** Waits until member `name`'s process has exited (at most `timeoutMs`) and answers how it ended, e.g. `code 1`. */
  async waitForExit(name: string, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<string> {
    const m = this.get(name);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${name} still runs after ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([m.exited, late]);
    } finally {
      clearTimeout(timer);
    }
    return m.lastExit ?? 'not started';
  }

  /** Allocates ports for a future member without starting it, so a test can MemberAdd its peer URL first. */
  async reserveMember(name: string): Promise<MemberSpec> {
    if (this.byName.get(name)?.state === 'running' || this.byName.get(name)?.state === 'paused') {
      throw new Error(`member ${name} is already running`);
    }
    const [clientPort, peerPort] = await freePorts(2, this.host);
    const spec = { name, clientURL: `${this.clientScheme}://${this.host}:${clientPort}`, peerURL: `http://${this.host}:${peerPort}` };
    this.reserved.set(name, spec);
    return spec;
  }

  /** Like {@link reserveMember}, returning only the peer URL. */
  async reservePeerURL(name: string): Promise<string> {
    return (await this.reserveMember(name)).peerURL;
  }

  /**
   * Starts the process of a member that was already added to the cluster (MemberAdd, e.g. by the
   * agent under test), with `--initial-cluster-state existing` on a fresh data dir. Its URLs come
   * from `opts`, else its reservation, else its previous incarnation here, else new ports;
   * `--initial-cluster` comes from `opts.initialCluster`, else from the live member list.
   */
  async addMemberProcess(
    name: string,
    opts: StartMemberOptions & { peerURL?: string; clientURL?: string; initialCluster?: string } = {},
  ): Promise<LocalMember> {
    const previous = this.byName.get(name);
    if (previous && previous.state !== 'stopped') throw new Error(`member ${name} is already ${previous.state}`);
    const known = this.reserved.get(name) ?? previous ?? (await this.reserveMember(name));
    const peerURL = opts.peerURL ?? known.peerURL;
    let clientURL = opts.clientURL ?? known.clientURL;
    const initialCluster = opts.initialCluster ?? (await this.initialClusterFor(name, peerURL));
    const dataDir = path.join(this.root, `${name}.data`);
    for (let attempt = 1; ; attempt++) {
      // A member that was removed and added again must not find the old member's WAL.
      await fs.promises.rm(dataDir, { recursive: true, force: true });
      const m = this.addMember({ name, peerURL, clientURL }, initialCluster, opts.etcd ?? previous?.etcd);
      this.reserved.delete(name);
      this.spawnMember(m, 'existing', opts.launcher, opts.args);
      if (!(opts.wait ?? true)) return snapshot(m);
      try {
        await this.waitHealthy(name, opts.timeoutMs);
        return snapshot(m);
      } catch (err) {
        // A client port found free when it was reserved may be taken by someone else before etcd
        // binds it. Unlike the peer URL, the client URL is not in the member list yet: a new port serves.
        const url = new URL(clientURL);
        if (opts.clientURL !== undefined || attempt >= 3 || !String(err).includes(`${url.host}: bind: address already in use`)) throw err;
        [url.port] = (await freePorts(1, url.hostname)).map(String);
        clientURL = `${url.protocol}//${url.host}`;
      }
    }
  }

  /** Waits until member `name` (default: every running member) answers /health with `"true"`. */
  async waitHealthy(name?: string, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<void> {
    const targets = name ? [this.get(name)] : [...this.byName.values()].filter((m) => m.state === 'running');
    const deadline = Date.now() + timeoutMs;
    const reasons = new Map<Member, string>();
    for (;;) {
      for (const m of targets) {
        if (m.state === 'stopped') throw new Error(`${m.name} exited (${m.lastExit ?? 'not started'})${logTail(m)}`);
      }
      const results = await Promise.all(
        targets.map((m) => checkHealth(m.clientURL, Math.min(1000, deadline - Date.now()), this.opts.clientTls)),
      );
      results.forEach((r, i) => (r === 'ok' ? reasons.delete(targets[i]) : reasons.set(targets[i], r)));
      if (reasons.size === 0) return;
      if (Date.now() >= deadline) {
        const detail = [...reasons].map(([m, r]) => `${m.name}: ${r}${logTail(m)}`).join('\n');
        throw new Error(`etcd not healthy after ${timeoutMs} ms\n${detail}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Whether member `name` answers /health with `"true"` within `timeoutMs` (false for a paused one). */
  async isHealthy(name: string, timeoutMs = 1000): Promise<boolean> {
    return (await checkHealth(this.get(name).clientURL, timeoutMs, this.opts.clientTls)) === 'ok';
  }

  /** What member `name`'s /health says within `timeoutMs`, and why when it is not ok (a refusal is not a timeout). */
  healthCheck(name: string, timeoutMs = 1000): Promise<HealthCheck> {
    return probeHealth(this.get(name).clientURL, timeoutMs, this.opts.clientTls);
  }

  /**
   * Runs etcdctl (API v3) against `endpoints` (default: running members) and resolves to its stdout.
   * Pass voters for writes: a learner among the endpoints fails them with "rpc not supported for learner".
   */
  etcdctl(args: string[], endpoints: string[] = this.runningURLs()): Promise<string> {
    const env = { ...withoutPrefixes(process.env, ['ETCDCTL_', 'ETCD_']), ETCDCTL_API: '3' };
    const tls = this.opts.clientTls;
    const tlsArgs = tls
      ? [`--cacert=${tls.ca}`, ...(tls.clientCert && tls.clientKey ? [`--cert=${tls.clientCert}`, `--key=${tls.clientKey}`] : [])]
      : [];
    // A --user in `args` comes later and wins.
    const userArgs = this.etcdctlUser === undefined ? [] : [`--user=${this.etcdctlUser}`];
    const argv = [`--endpoints=${endpoints.join(',')}`, ...tlsArgs, ...userArgs, ...args];
    return new Promise((resolve, reject) => {
      execFile(this.etcd.etcdctl, argv, { env, timeout: 15_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
        if (err) reject(new Error(`etcdctl ${args.join(' ')} failed: ${String(stderr).trim() || err.message}`));
        else resolve(String(stdout));
      });
    });
  }

  /**
   * Makes the harness's etcdctl calls (member list, the --initial-cluster of a new member) log in as
   * `userAndPassword` (`user:password`), or as nobody again: with auth on, etcd 3.5+ answers MemberList
   * only to a user.
   */
  authenticateAs(userAndPassword: string | undefined): void {
    this.etcdctlUser = userAndPassword;
  }

  /**
   * The member list, ids in hex; unstarted members have an empty name. Linearizable wherever etcd has
   * the field (3.5+; etcdctl 3.5 does not ask it, and a full run's list on 3.5, read at a follower right
   * after `member add` at another member, lacked the new member); etcd 3.4 answers MemberList from the
   * answering member's local state (etcd-io/etcd#11198), so there a linearizable read at the same
   * member comes first, as the agent does it (once it returns, that member has applied everything
   * committed before it: a full run's list on 3.4, read at a follower right after the agent's promote,
   * still showed a learner). Through etcd's own JSON
   * gateway (`POST /v3/cluster/member/list`), each endpoint in turn until one answers, as etcdctl's
   * client fails over; with a user (auth on) through etcdctl, which logs in. A full run asked ~650
   * member lists: one etcdctl process each cost ~40 s of CPU in all.
   */
  async listMembers(endpoints: string[] = this.runningURLs()): Promise<ListedMember[]> {
    if (this.etcdctlUser !== undefined) return parseMemberList(await this.etcdctl(['member', 'list', '-w', 'json'], endpoints));
    const body = { linearizable: this.etcd.minor !== '3.4' };
    const failures: string[] = [];
    const said = (a: { status: number; text: string }): string =>
      a.status === 0 ? a.text : `HTTP ${a.status} ${a.text.trim().slice(0, 200)}`;
    for (const url of endpoints) {
      const barrier = body.linearizable
        ? undefined
        : await postJson(
            url,
            '/v3/kv/range',
            { key: Buffer.from('barrier').toString('base64'), count_only: true },
            5000,
            this.opts.clientTls,
          );
      if (barrier !== undefined && barrier.status !== 200) {
        failures.push(`${url}: barrier read ${said(barrier)}`);
        continue;
      }
      const answer = await postJson(url, '/v3/cluster/member/list', body, 5000, this.opts.clientTls);
      if (answer.status === 200) return parseMemberList(answer.text);
      failures.push(`${url}: ${said(answer)}`);
    }
    throw new Error(`member list failed at every endpoint: ${failures.join('; ') || 'no endpoint'}`);
  }

  /** Kills every process (SIGKILL), waits for them, and removes the run directory; safe to call twice. */
  destroy(): Promise<void> {
    this.destroying ??= (async () => {
      const members = [...this.byName.values()];
      members.forEach((m) => signal(m, 'SIGKILL'));
      await Promise.all(members.map((m) => m.exited));
      if (!process.env.LOCAL_ETCD_KEEP) await fs.promises.rm(this.root, { recursive: true, force: true });
      live.delete(this);
    })();
    return this.destroying;
  }

  private get clientScheme(): 'http' | 'https' {
    return this.opts.clientTls ? 'https' : 'http';
  }

  private get host(): string {
    return this.opts.host ?? '127.0.0.1';
  }

  private async boot(): Promise<void> {
    live.add(this);
    installExitHook();
    const prefix = this.opts.name ?? 'etcd';
    const ports = await freePorts(2 * this.opts.size, this.host);
    const specs = Array.from({ length: this.opts.size }, (_, i) => ({
      name: `${prefix}-${i}`,
      clientURL: `${this.clientScheme}://${this.host}:${ports[2 * i]}`,
      peerURL: `http://${this.host}:${ports[2 * i + 1]}`,
    }));
    const initialCluster = specs.map((s) => `${s.name}=${s.peerURL}`).join(',');
    for (const spec of specs) this.spawnMember(this.addMember(spec, initialCluster), 'new');
    await this.waitHealthy(undefined, this.opts.startTimeoutMs ?? DEFAULT_TIMEOUT_MS);
  }

  private addMember(spec: MemberSpec, initialCluster: string, etcd = this.etcd): Member {
    const logDir = this.opts.logDir ?? this.root;
    fs.mkdirSync(logDir, { recursive: true });
    const m: Member = {
      ...spec,
      etcd,
      dataDir: path.join(this.root, `${spec.name}.data`),
      logFile: path.join(logDir, `${spec.name}.log`),
      state: 'stopped',
      exited: Promise.resolve(),
      initialCluster,
    };
    this.byName.delete(spec.name); // re-adding a name moves it to the end, like etcd's own list order
    this.byName.set(spec.name, m);
    return m;
  }

  private spawnMember(m: Member, clusterState: 'new' | 'existing', launcher: string[] = [], extra: string[] = []): void {
    if (this.destroying) throw new Error('cluster is destroyed');
    const { name, dataDir, clientURL, peerURL } = m;
    const args = [
      `--name=${name}`,
      `--data-dir=${dataDir}`,
      `--listen-client-urls=${clientURL}`,
      `--advertise-client-urls=${clientURL}`,
      `--listen-peer-urls=${peerURL}`,
      `--initial-advertise-peer-urls=${peerURL}`,
      `--initial-cluster=${m.initialCluster}`,
      `--initial-cluster-state=${clusterState}`,
      `--initial-cluster-token=${this.token}`,
      ...baseFlags(m.etcd.minor),
      ...tlsFlags(this.opts.clientTls),
      ...(this.opts.extraArgs ?? []),
      ...(this.opts.memberArgs?.({ name, clientURL, peerURL, dataDir }) ?? []),
      ...extra,
    ];
    const log = fs.openSync(m.logFile, 'a');
    let child: ChildProcess;
    try {
      // With setpriv (util-linux), the kernel kills etcd when this process dies, even by SIGKILL or under
      // jest, whose sandboxed `process` never sees 'exit'; setpriv execs etcd, so the pid stays etcd's.
      // A launcher that execs etcd (a start script ending in `exec "$0" "$@"`) keeps this pid too.
      const setpriv = which('setpriv');
      const words = [...launcher, m.etcd.etcd, ...args];
      const [cmd, argv] = setpriv ? [setpriv, ['--pdeathsig=KILL', '--', ...words]] : [words[0], words.slice(1)];
      // Own session: job control (a terminal's ^C/^Z, an orphaned process group's SIGHUP+SIGCONT) must not
      // reach etcd behind the harness's back; only pause/resume/stop/kill signal it.
      child = spawn(cmd, argv, { stdio: ['ignore', log, log], env: etcdEnv(this.opts.env), detached: true });
    } finally {
      fs.closeSync(log);
    }
    m.child = child;
    m.state = 'running';
    m.exited = new Promise((resolve) => {
      const onGone = (why: string): void => {
        if (m.child === child) Object.assign(m, { child: undefined, state: 'stopped', lastExit: why });
        resolve();
      };
      child.once('exit', (code, sig) => onGone(sig ? `signal ${sig}` : `code ${code}`));
      child.once('error', (err) => child.pid === undefined && onGone(err.message));
    });
  }

  private async initialClusterFor(name: string, peerURL: string): Promise<string> {
    const listed = await this.listMembers();
    const norm = (u: string): string => u.replace(/\/+$/, '').toLowerCase();
    if (!listed.some((m) => m.peerURLs.some((u) => norm(u) === norm(peerURL)))) {
      throw new Error(`no member with peer URL ${peerURL} in the cluster: add ${name} (MemberAdd) before starting it`);
    }
    // etcd matches --initial-cluster to the live list by peer URL; names only need to be unique.
    return listed
      .flatMap((m, i) => {
        const own = m.peerURLs.some((u) => norm(u) === norm(peerURL));
        return m.peerURLs.map((u) => `${own ? name : m.name || `unstarted-${i}`}=${u}`);
      })
      .join(',');
  }

  private runningURLs(): string[] {
    return [...this.byName.values()].filter((m) => m.state === 'running').map((m) => m.clientURL);
  }

  private get(name: string): Member {
    const m = this.byName.get(name);
    if (!m) throw new Error(`no member ${name} (members: ${[...this.byName.keys()].join(', ')})`);
    return m;
  }

  /** Used by the process 'exit' hook, where nothing asynchronous runs any more. */
  killAllSync(): void {
    for (const m of this.byName.values()) signal(m, 'SIGKILL');
    try {
      if (!process.env.LOCAL_ETCD_KEEP) fs.rmSync(this.root, { recursive: true, force: true });
    } catch {
      // best effort: the process is exiting anyway
    }
  }
}

function snapshot(m: Member): LocalMember {
  const { name, clientURL, peerURL, dataDir, logFile, state } = m;
  return Object.freeze({ name, clientURL, peerURL, dataDir, logFile, state, pid: m.child?.pid, version: m.etcd.version });
}

/**
 * Signals the member's process group (etcd is spawned detached, as its own group): with a launcher
 * (the start script that supervises etcd in kube-inject's pods) the script and its helper loops get
 * it too, as a container's processes all do, so none outlives the test.
 */
function signal(m: Member, sig: NodeJS.Signals): void {
  const pid = m.child?.pid;
  try {
    if (pid !== undefined) process.kill(-pid, sig);
    else m.child?.kill(sig);
  } catch {
    try {
      m.child?.kill(sig);
    } catch {
      // already gone
    }
  }
}

/** On Linux, waits (synchronously, at most 1 s) until the kernel shows the process stopped, or no longer stopped. */
function awaitStopState(pid: number | undefined, stopped: boolean): void {
  const deadline = Date.now() + 1000;
  for (;;) {
    let state: string;
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      state = stat.charAt(stat.lastIndexOf(')') + 2); // the command name in parentheses may hold spaces
    } catch {
      return; // no /proc (not Linux), or the process is gone
    }
    if ((state === 'T') === stopped) return;
    if (Date.now() > deadline) throw new Error(`process ${pid} did not ${stopped ? 'stop' : 'continue'} (state ${state})`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2); // a synchronous 2 ms sleep
  }
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // A test run that crashes must not leave etcd processes behind; only synchronous work runs here.
  process.on('exit', () => live.forEach((c) => c.killAllSync()));
}

function tlsFlags(tls: ClientTls | undefined): string[] {
  if (!tls) return [];
  const flags = [`--cert-file=${tls.serverCert}`, `--key-file=${tls.serverKey}`, `--trusted-ca-file=${tls.ca}`];
  return tls.clientCert ? [...flags, '--client-cert-auth'] : flags;
}

/** The CA and client certificate to reach an https client URL with (none for http). */
function clientTlsOptions(clientURL: string, tls?: ClientTls): https.RequestOptions {
  if (!clientURL.startsWith('https:') || tls === undefined) return {};
  return {
    ca: fs.readFileSync(tls.ca),
    ...(tls.clientCert && tls.clientKey ? { cert: fs.readFileSync(tls.clientCert), key: fs.readFileSync(tls.clientKey) } : {}),
  };
}

/** 'ok' when the member answers /health with `"true"` within `timeoutMs`, else why not. */
async function checkHealth(clientURL: string, timeoutMs: number, tls?: ClientTls): Promise<string> {
  const check = await probeHealth(clientURL, timeoutMs, tls);
  return check.verdict === 'ok' ? 'ok' : check.detail;
}

/** What /health at `clientURL` says within `timeoutMs` (see {@link HealthCheck}). */
async function probeHealth(clientURL: string, timeoutMs: number, tls?: ClientTls): Promise<HealthCheck> {
  let answer: { status: number; text: string };
  try {
    answer = await request(`${clientURL}/health`, { timeoutMs: Math.max(timeoutMs, 1), tls: clientTlsOptions(clientURL, tls) });
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    if (err instanceof RequestTimeout) return { verdict: 'timeout', detail };
    const code = (err as { code?: unknown }).code;
    return { verdict: code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'EPIPE' ? 'refused' : 'error', detail };
  }
  try {
    if ((JSON.parse(answer.text) as { health?: unknown }).health === 'true') return { verdict: 'ok', detail: 'ok' };
  } catch {
    // not JSON: said below
  }
  return { verdict: 'unhealthy', detail: `HTTP ${answer.status} ${answer.text.trim()}` };
}

/**
 * The member list of etcdctl's `-w json` or of the gateway: uint64 ids, as JSON numbers (etcdctl,
 * which JSON.parse would round: quoted first) or strings (the gateway), in hex.
 */
function parseMemberList(text: string): ListedMember[] {
  const parsed = JSON.parse(text.replace(/"(ID|cluster_id|member_id)":(\d+)/g, '"$1":"$2"')) as {
    members?: Array<Partial<ListedMember> & { ID: string }>;
  };
  return (parsed.members ?? []).map((m) => ({
    id: BigInt(m.ID).toString(16),
    name: m.name ?? '',
    peerURLs: m.peerURLs ?? [],
    clientURLs: m.clientURLs ?? [],
    isLearner: m.isLearner ?? false,
    // etcd omits name and client URLs until the member has published itself.
    started: Boolean(m.name),
  }));
}

/** POSTs `body` as JSON to `path` of a member's client URL; status 0 and the reason when no answer came. */
function postJson(
  clientURL: string,
  path: string,
  body: object,
  timeoutMs: number,
  tls?: ClientTls,
): Promise<{ status: number; text: string }> {
  return request(`${clientURL}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    payload: JSON.stringify(body),
    timeoutMs,
    tls: clientTlsOptions(clientURL, tls),
  }).catch((err: Error) => ({ status: 0, text: err.message }));
}

function logTail(m: Member, lines = 15): string {
  try {
    const text = fs.readFileSync(m.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    return `\n--- last lines of ${m.logFile} ---\n${text}`;
  } catch {
    return '';
  }
}

function withoutPrefixes(env: NodeJS.ProcessEnv, prefixes: string[]): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([k]) => !prefixes.some((p) => k.startsWith(p))));
}

function etcdEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  // etcd 3.4 reads every ETCD_* variable as a flag and exits when one is also given on the command line.
  const env = { ...withoutPrefixes(process.env, ['ETCD_']), ...extra };
  // etcd 3.4 refuses to start on architectures other than amd64/ppc64le unless told it may.
  const goArch: Record<string, string> = { arm64: 'arm64', arm: 'arm', ia32: '386', s390x: 's390x' };
  const arch = goArch[process.arch];
  if (arch && !env.ETCD_UNSUPPORTED_ARCH) env.ETCD_UNSUPPORTED_ARCH = arch;
  return env;
}

function which(cmd: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    const candidate = path.join(dir, cmd);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/** The etcd binary of `ETCD_VERSION` (or `ETCD_BIN`): see scripts/etcd-version.ts. */
export function findEtcd(): string {
  return etcdInstall().etcd;
}

/** The etcdctl beside it. */
export function findEtcdctl(): string {
  return etcdInstall().etcdctl;
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const flags = new Map<string, string>();
  for (let i = 0; i < rest.length; i += 2) flags.set(rest[i].replace(/^--/, ''), rest[i + 1] ?? '');
  if (command !== 'start') {
    process.stderr.write('usage: local-cluster start [--size 3] [--dir .local-cluster] [--name etcd] [--host 127.0.0.1]\n');
    process.exit(2);
  }
  const dir = path.resolve(flags.get('dir') ?? '.local-cluster');
  const cluster = await LocalEtcdCluster.start({
    size: Number(flags.get('size') ?? 3),
    name: flags.get('name'),
    host: flags.get('host'),
    dataRoot: dir,
    logDir: path.join(dir, 'logs'),
  });
  const endpoints = cluster.clientURLs().join(',');
  // Written whole then renamed: a script polling for the file never reads half of it.
  await fs.promises.writeFile(path.join(dir, 'endpoints.tmp'), `${endpoints}\n`);
  await fs.promises.rename(path.join(dir, 'endpoints.tmp'), path.join(dir, 'endpoints'));
  process.stdout.write(`ETCD_ENDPOINTS=${endpoints}\nETCD_VERSION=${cluster.etcd.version}\n`);
  process.stderr.write(`etcd logs in ${path.join(dir, 'logs')}; SIGINT or SIGTERM stops the cluster\n`);
  const shutdown = async (): Promise<void> => {
    // All members stop at once, so a leader's hand-over cannot succeed: do not wait out its 6 s timeout.
    await Promise.all(cluster.members.map((m) => cluster.stop(m.name, 1500)));
    await cluster.destroy();
    await fs.promises.rm(path.join(dir, 'endpoints'), { force: true });
    process.exit(0);
  };
  process.once('SIGINT', () => void shutdown());
  process.once('SIGTERM', () => void shutdown());
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
