/**
 * A rolling upgrade through the agent, on real etcd binaries of three minor versions (3.5.35 →
 * 3.6.16 → 3.7.3, scripts/etcd.sh): a 3-member 3.5 cluster, a real agent (the built bin) beside each
 * member, a writer putting increasing values all along, and a caller asking `/v1/health` of an agent
 * whose member stays up and kbagent's roleProbe of every agent. Each member in turn is restarted as
 * its pod would be with the next minor's image, on the same data directory (as kubeadm does between
 * Kubernetes releases): stopped, `prepare` run (the init container), etcd started through the start
 * script kube-inject gives the etcd container (busybox sh); the next waits until health says the
 * member is back.
 *
 * It proves, on the mixed-version cluster: health is never `healthy` while a member's process is
 * stopped (degraded or worse then), and roleProbe names no role for it; a join (a learner started on
 * the cluster's lowest version, which its own agent promotes) and a leave through the agent work;
 * etcd's cluster version moves only once every member runs the new minor; no acknowledged write is
 * lost. And two starts etcd would answer with a crash loop, each shown first as etcd answers it
 * alone, then through prepare and the start script (one line, exit 1, named by health), then undone:
 * - 3.7 on a 3.6 member whose write-ahead log still holds, after its last snapshot, requests etcd 3.5
 *   wrote (etcd-0 runs 3.6 with etcd's default snapshot count, as a quiet cluster does): etcd 3.7
 *   panics; the remedy the refusal names (3.6 once more with --snapshot-count=1) makes 3.7 start;
 * - 3.5 on 3.7 data (a downgrade): etcd 3.5 exits "invalid downgrade"; the 3.7 binary put back
 *   brings the member back.
 *
 * It runs once (not per version): it picks its binaries itself. The other members snapshot every
 * SNAPSHOT_COUNT entries, as a busy cluster does every 10,000 (etcd's default).
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readDataVersions } from '../../agent/etcd-data/data-dir';
import type { DataVersions } from '../../agent/etcd-data/data-dir';
import { gateLines, gateRefusal, versionGate } from '../../agent/prepare/version-gate';
import { flagLine } from '../../agent/prepare/etcd-control';
import { installStartScript, startScriptPath } from '../../agent/prepare/start-script';
import { scanWal } from '../../agent/etcd-data/wal-scan';
import { binCommand } from '../../scripts/bin-command';
import { etcdInstallOf, type EtcdInstall } from '../../scripts/etcd-version';
import { ChildAgent, MAIN_JS as main } from '../helpers/child-agent';
import { LocalEtcdCluster, startTestCluster } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';
import type { Answer } from '../helpers/http-call';
import { get, post } from '../helpers/membership';
import { etcdVersions, HealthAnswer, HealthCaller, readPrefix, Writer } from '../helpers/rolling-upgrade';

/** The agents' ETCD_AGENT_HEALTH_MAX_AGE_MS (the default): how long an observation serves roleProbe. */
const ROLE_MAX_AGE_MS = 1000;

const CORE = ['etcd-0', 'etcd-1', 'etcd-2'];
/** etcd's --snapshot-count here (its default is 10,000); see the module comment. */
const SNAPSHOT_COUNT = 100;
/** Longest a member may take to be healthy again after its new binary starts. */
const BACK_WITHIN_MS = 20_000;
/** The etcd container's shell in kube-inject's pods: Debian's static busybox (the image copies it there). */
const BUSYBOX = '/bin/busybox';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** One member restart: when its process was stopped and started, and what health and the writer saw. */
interface Restart {
  member: string;
  from: string;
  to: string;
  stopAt: number;
  exitedAt: number;
  spawnedAt: number;
  backAt: number;
  /** How long prepare (the init container) ran while the member was down. */
  prepareMs?: number;
}

describe('a rolling upgrade 3.5 → 3.6 → 3.7 through the agent (real etcd of each version, built agents)', () => {
  let v35: EtcdInstall;
  let v36: EtcdInstall;
  let v37: EtcdInstall;
  let cluster: LocalEtcdCluster;
  const agents = new Map<string, ChildAgent>();
  let writer: Writer;
  let caller: HealthCaller;
  /** The member being restarted, whose agent the caller does not ask. */
  let restarting: string | undefined;
  const restarts: Restart[] = [];
  /** Windows in which a member's process was not running (exit seen → new process spawned). */
  const stopped: Array<{ member: string; from: number; to: number }> = [];
  const joins: string[] = [];
  /** What etcd and the agent answered to a start they refuse, one line each (printed with the figures). */
  const findings: string[] = [];
  /** Per member: the flags file prepare writes and the note the start script leaves (the pod's emptyDir). */
  let runDir: string;
  const flagsFile = (name: string): string => path.join(runDir, name, 'etcd-flags.sh');
  const noteFile = (name: string): string => path.join(runDir, name, 'etcd-start-note');
  /** The data versions each restart found in the stopped member's directory (what prepare reads). */
  const recorded: Array<{ member: string; version: string; versions: DataVersions }> = [];

  const agentUrl = (name: string): string => {
    const agent = agents.get(name);
    if (agent === undefined) throw new Error(`no agent for ${name}`);
    return agent.url;
  };
  /** The agent the caller asks: the first core member's that is not being restarted. */
  const target = (): { name: string; url: string } => {
    const name = CORE.find((n) => n !== restarting) ?? CORE[0];
    return { name, url: agentUrl(name) };
  };

  const startAgent = async (name: string): Promise<ChildAgent> => {
    const member = cluster.member(name);
    const agent = await ChildAgent.start(main, {
      ETCD_AGENT_MEMBER_NAME: name,
      ETCD_AGENT_ENDPOINTS: CORE.map((n) => cluster.member(n).clientURL).join(','),
      ETCD_AGENT_LOCAL_ENDPOINT: member.clientURL,
      ETCD_AGENT_LOCAL_PEER_URL: member.peerURL,
      ETCD_AGENT_START_NOTE_FILE: noteFile(name),
      ETCD_AGENT_LOG_LEVEL: process.env.UPGRADE_DEBUG ?? 'info',
    });
    agents.set(name, agent);
    return agent;
  };

  beforeAll(async () => {
    if (!fs.existsSync(BUSYBOX))
      throw new Error(`${BUSYBOX} is missing: the etcd container's start script runs under busybox (apt-get install busybox-static)`);
    [v35, v36, v37] = [etcdInstallOf('3.5'), etcdInstallOf('3.6'), etcdInstallOf('3.7')];
    runDir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcd-upgrade-'));
    for (const name of [...CORE, 'etcd-3', 'etcd-4']) fs.mkdirSync(path.join(runDir, name));
    cluster = await startTestCluster(3, { etcd: v35, extraArgs: [`--snapshot-count=${SNAPSHOT_COUNT}`] });
    for (const name of CORE) await startAgent(name);
    writer = new Writer(() => CORE.map((n) => cluster.member(n).clientURL), 'upgrade/w/').start();
    caller = new HealthCaller(target, () => [...agents].map(([name, a]) => ({ name, url: a.url }))).start();
    // A precondition, not a figure: a patience for a new cluster and its three agents to answer healthy.
    await waitHealthy(0, 40_000);
  }, patience(90_000));

  afterAll(async () => {
    await writer?.stop();
    await caller?.stop();
    await Promise.all([...agents.values()].map((a) => a.kill('SIGKILL')));
    await cluster?.destroy();
    if (runDir !== undefined) fs.rmSync(runDir, { recursive: true, force: true });
    if (caller !== undefined && writer !== undefined) process.stdout.write(figures());
  });

  /** Resolves with the first caller answer `healthy`, every member reachable, observed after `since`. */
  async function waitHealthy(since: number, withinMs = BACK_WITHIN_MS): Promise<HealthAnswer> {
    return eventually(
      () => {
        const answer = caller.health.find((a) => a.observedAt !== undefined && a.observedAt > since && a.status === 'healthy');
        if (answer !== undefined) return answer;
        const last = caller.health[caller.health.length - 1];
        throw new Error(`health not healthy yet; last answer: ${JSON.stringify(last?.body ?? last)}`);
      },
      { within: withinMs, every: 50 },
    );
  }

  /**
   * Restarts `name` as its pod with a new etcd image would be: stops it, runs prepare (the init
   * container), starts `to` through the start script (with `args` after its flags), and waits until
   * health says the member is back. It stays down until the caller has a health answer observed
   * while it was down and a roleProbe of its agent sent the max age after it stopped, so that the
   * checks of what was answered while members were stopped have something to judge.
   */
  async function restartOn(name: string, to: EtcdInstall, args: string[] = []): Promise<void> {
    const from = cluster.member(name).version;
    restarting = name;
    const stopAt = Date.now();
    await cluster.stop(name);
    const exitedAt = Date.now();
    recorded.push({ member: name, version: from, versions: readDataVersions(cluster.member(name).dataDir) });
    const [prepared] = await Promise.all([
      prepare(name),
      caller.recordedObservationSince(exitedAt),
      eventually(() => caller.roles.some((r) => r.agent === name && r.sentAt >= exitedAt + ROLE_MAX_AGE_MS), { within: 10_000, every: 50 }),
    ]);
    const prepareMs = prepared.ms;
    if (prepared.code !== 0) throw new Error(`prepare of ${name} exited ${prepared.code}:\n${prepared.output}`);
    const spawnedAt = Date.now();
    stopped.push({ member: name, from: exitedAt, to: spawnedAt });
    await cluster.restart(name, { etcd: to, wait: false, launcher: startScript(name, to), args });
    const back = await waitHealthy(spawnedAt);
    restarting = undefined;
    restarts.push({ member: name, from, to: to.version, stopAt, exitedAt, spawnedAt, backAt: back.at, prepareMs });
    expect(cluster.member(name).version).toBe(to.version);
  }

  /** Each running core member's `/version`: its server version and the cluster version it applied. */
  async function versions(): Promise<Record<string, { server: string; cluster: string }>> {
    const entries = await Promise.all(CORE.map(async (n) => [n, await etcdVersions(cluster.member(n).clientURL)] as const));
    return Object.fromEntries(entries);
  }

  /** Waits until every core member reports cluster version `want` (etcd moves it once all members run the new minor). */
  async function clusterVersionBecomes(want: string, withinMs = 20_000): Promise<number> {
    return eventually(
      async () => {
        const seen = await versions();
        if (!Object.values(seen).every((v) => v.cluster === want))
          throw new Error(`cluster version not ${want} yet: ${JSON.stringify(seen)}`);
        return Date.now();
      },
      { within: withinMs, every: 200 },
    );
  }

  /** Repeats a membership call while it answers a retryable refusal (busy, unsafe), as a controller does. */
  async function membershipCall(via: string, route: string, body: object, withinMs = 20_000): Promise<Answer> {
    const until = Date.now() + patience(withinMs);
    for (;;) {
      const answer = await post(via, route, body, 30_000);
      if (!(answer.status === 409 && answer.json?.error?.retryable === true) || Date.now() > until) return answer;
      await sleep(300);
    }
  }

  /**
   * Through the agent of a member that stays up: joins `name` (a learner), starts it on `etcd` with its
   * own agent (which promotes it once in sync), then makes it leave and stops it.
   */
  async function joinAndLeave(name: string, etcd: EtcdInstall, via: string): Promise<void> {
    const started = Date.now();
    const spec = await cluster.reserveMember(name);
    const added = await membershipCall(agentUrl(via), '/v1/members/join', { name, peerURLs: [spec.peerURL] });
    expect([added.status, added.json?.outcome, added.json?.member?.isLearner]).toEqual([202, 'added', true]);
    const addedAt = Date.now();
    // Its pod's containers start together: etcd and the sidecar.
    await cluster.addMemberProcess(name, { etcd, wait: false });
    await startAgent(name);
    await cluster.waitHealthy(name);
    const runningAt = Date.now();
    // Its own agent promotes it once it is in sync; nobody calls join again until it is a voter.
    await eventually(
      async () => {
        const list = await get(agentUrl(via), '/v1/members');
        const member = (list.json?.members ?? []).find((m: { name: string }) => m.name === name);
        if (member === undefined || !member.started || member.isLearner) throw new Error(`${name} not promoted yet: ${list.text}`);
      },
      { within: 20_000, every: 200 },
    );
    const promotedAt = Date.now();
    const again = await post(agentUrl(via), '/v1/members/join', { name, peerURLs: [spec.peerURL] });
    expect([again.status, again.json?.outcome, again.json?.complete]).toEqual([200, 'already-member', true]);
    const left = await membershipCall(agentUrl(via), '/v1/members/leave', { name });
    expect([left.status, left.json?.outcome]).toEqual([200, 'removed']);
    if (process.env.UPGRADE_DEBUG) {
      for (const who of [name, via]) {
        const lines =
          agents.get(who)?.lines.filter((l) => l.message !== 'request' && Number(new Date(String(l.timestamp))) >= started) ?? [];
        process.stdout.write(`--- ${who} agent lines\n${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
      }
    }
    await agents.get(name)?.kill('SIGTERM');
    agents.delete(name);
    await cluster.stop(name, 3000);
    joins.push(
      `${name} on ${etcd.version} (cluster ${await clusterVersionNow()}): added +${addedAt - started} ms, its etcd healthy +${runningAt - started}, ` +
        `promoted by its agent +${promotedAt - started}, left +${Date.now() - started} ms`,
    );
  }

  /** Stops `name`'s etcd and records it as down from its exit on, until the caller closes the window. */
  async function stopUntilFurtherNotice(name: string): Promise<{ stopAt: number; exitedAt: number; window: (typeof stopped)[number] }> {
    const stopAt = Date.now();
    await cluster.stop(name);
    const exitedAt = Date.now();
    const window = { member: name, from: exitedAt, to: Number.POSITIVE_INFINITY };
    stopped.push(window);
    return { stopAt, exitedAt, window };
  }

  async function clusterVersionNow(): Promise<string> {
    return (await etcdVersions(cluster.member(target().name).clientURL)).cluster;
  }

  /** The figures the run prints (README "Upgrading etcd"). */
  function figures(): string {
    const lines = ['', 'rolling upgrade figures:'];
    for (const r of restarts) {
      const seen = caller.health.filter((a) => a.sentAt >= r.stopAt && a.at <= r.backAt);
      const notHealthy = seen.filter((a) => a.status !== 'healthy');
      const degradedMs = notHealthy.length === 0 ? 0 : r.backAt - notHealthy[0].at;
      lines.push(
        `  ${r.member} ${r.from} → ${r.to}: stopped ${r.spawnedAt - r.exitedAt} ms${r.prepareMs === undefined ? '' : ` (prepare ${r.prepareMs} ms)`}, back ${r.backAt - r.spawnedAt} ms after start; ` +
          `health not healthy for ${degradedMs} ms (${JSON.stringify(caller.countByStatus(seen))}); ` +
          `writer: ${writer.ackedBetween(r.stopAt, r.backAt)} acknowledged, longest gap ${writer.longestGapMs(r.stopAt, r.backAt)} ms`,
      );
    }
    lines.push(...joins.map((j) => `  ${j}`));
    lines.push(...findings.map((f) => `  found: ${f}`));
    lines.push(`  writer: ${writer.acks.length} acknowledged puts, ${writer.failures} failed (not acknowledged)`);
    lines.push(`  /v1/health answers per state: ${JSON.stringify(caller.countByStatus())}`);
    const whileStopped = caller.health.filter(
      (a) => a.observedAt !== undefined && stopped.some((w) => a.observedAt! >= w.from && a.observedAt! <= w.to),
    );
    lines.push(`  /v1/health answers observed while a member's process was stopped: ${JSON.stringify(caller.countByStatus(whileStopped))}`);
    const roles: Record<string, number> = {};
    for (const r of caller.roles) roles[r.role ?? 'error'] = (roles[r.role ?? 'error'] ?? 0) + 1;
    lines.push(`  roleProbe answers: ${JSON.stringify(roles)}`);
    const down = (r: { agent: string; sentAt: number; at: number }): boolean =>
      stopped.some((w) => w.member === r.agent && r.at >= w.from && r.sentAt <= w.to);
    const errors = caller.roles.filter((r) => r.role === undefined);
    const upErrors = errors.filter((r) => !down(r));
    lines.push(
      `  roleProbe errors: ${errors.length - upErrors.length} from agents whose member was down, ${upErrors.length} others${upErrors.length === 0 ? '' : ` (${[...new Set(upErrors.map((r) => r.error))].slice(0, 3).join(' | ')})`}`,
    );
    return `${lines.join('\n')}\n`;
  }

  it(
    'when two of three members run 3.6, then the cluster stays at 3.5, and a 3.5 learner joins, is promoted and leaves through the agent',
    async () => {
      // etcd-0 runs 3.6 with etcd's default snapshot count, as a quiet cluster does: its log keeps what 3.5 wrote.
      await restartOn('etcd-0', v36, ['--snapshot-count=10000']);
      await restartOn('etcd-1', v36);
      const seen = await versions();
      expect(Object.values(seen).map((v) => v.server)).toEqual([v36.version, v36.version, v35.version]);
      expect(Object.values(seen).map((v) => v.cluster)).toEqual(['3.5.0', '3.5.0', '3.5.0']);
      await joinAndLeave('etcd-3', v35, 'etcd-0');
    },
    patience(90_000),
  );

  it(
    'when the third member runs 3.6, then the cluster version becomes 3.6',
    async () => {
      await restartOn('etcd-2', v36);
      await clusterVersionBecomes('3.6.0');
    },
    patience(60_000),
  );

  it(
    "when a 3.6 member whose log still holds 3.5's requests is started on 3.7, then etcd alone panics, prepare's start script refuses it with one line naming the remedy, and the remedy works",
    async () => {
      const name = 'etcd-0';
      const member = cluster.member(name);
      restarting = name;
      const { stopAt, exitedAt, window } = await stopUntilFurtherNotice(name);
      const tail = scanWal(member.dataDir);
      expect(tail?.v2Entries).toBeGreaterThan(0);

      // What etcd 3.7 does by itself: it panics replaying the log, exit 2; the kubelet would restart it forever.
      let from = fs.statSync(member.logFile).size;
      await cluster.restart(name, { etcd: v37, wait: false });
      expect(await cluster.waitForExit(name)).toBe('code 2');
      expect(logSince(member.logFile, from)).toContain('unmarshal should never fail');
      findings.push(
        `etcd ${v37.version} alone on 3.6 data with ${tail?.v2Entries} requests of 3.5 after the last snapshot: panic "unmarshal should never fail", exit 2`,
      );

      // The pod's way: prepare, then the start script, with the 3.7 binary.
      const prepared = await prepare(name);
      expect(prepared.prepared).toMatchObject({
        dataVersions: { storage: '3.6.0', cluster: '3.6.0', v2Entries: tail?.v2Entries },
        etcdVersions: '3.6 to 3.6',
      });
      from = fs.statSync(member.logFile).size;
      await cluster.restart(name, { etcd: v37, wait: false, launcher: startScript(name, v37) });
      expect(await cluster.waitForExit(name)).toBe('code 1');
      const refusedAt = Date.now();
      const refusal =
        `etcd ${v37.version} cannot replay the ${tail?.v2Entries} requests etcd 3.5 left in this member's write-ahead log: ` +
        'run etcd 3.6 until it takes a snapshot (restart it once with --snapshot-count=1), then upgrade';
      expect(logSince(member.logFile, from)).toBe(`etcd-lifecycle-agent: ${refusal}\n`);
      expect((await observedSince(agentUrl(name), '/v1/health/local', refusedAt)).json.errors[0]).toBe(refusal);
      findings.push(`etcd ${v37.version} through prepare and the start script: exit 1, one line: "${refusal}"`);

      // The remedy the line names: 3.6 once more with --snapshot-count=1, until a snapshot clears the log.
      expect((await prepare(name)).code).toBe(0);
      window.to = Date.now();
      await cluster.restart(name, { etcd: v36, wait: false, launcher: startScript(name, v36), args: ['--snapshot-count=1'] });
      const back = await waitHealthy(window.to);
      restarting = undefined;
      restarts.push({
        member: name,
        from: `${v36.version} (refused ${v37.version})`,
        to: `${v36.version} --snapshot-count=1`,
        stopAt,
        exitedAt,
        spawnedAt: window.to,
        backAt: back.at,
      });
      await logClean(name);
      // Replaying its log from the old snapshot, etcd applies 3.5's cluster version again, and its storage
      // version monitor migrates the backend down to 3.5 (storageVersion removed) until the later 3.6 entry
      // brings it back: wait for etcd's own word that it is 3.6 again before stopping it.
      const seen = new Set<string>();
      const storageBack = Date.now();
      await eventually(
        async () => {
          const storage = (await etcdVersions(member.clientURL)).storage ?? 'none';
          seen.add(storage);
          if (storage !== '3.6.0') throw new Error(`${name}'s storage version is ${storage}, not 3.6.0, after its restart`);
        },
        { within: 20_000, every: 100 },
      );
      findings.push(
        `${name} on ${v36.version} after the restart: storage version ${[...seen].join(' → ')} (${Date.now() - storageBack} ms after its snapshot)`,
      );
    },
    patience(60_000),
  );

  it(
    'when one member runs 3.7, then the cluster stays at 3.6, and a 3.6 learner joins, is promoted and leaves through the agent',
    async () => {
      await restartOn('etcd-0', v37);
      const seen = await versions();
      expect(Object.values(seen).map((v) => v.server)).toEqual([v37.version, v36.version, v36.version]);
      expect(Object.values(seen).map((v) => v.cluster)).toEqual(['3.6.0', '3.6.0', '3.6.0']);
      await joinAndLeave('etcd-4', v36, 'etcd-1');
    },
    patience(90_000),
  );

  it(
    'when every member runs 3.7, then the cluster version becomes 3.7',
    async () => {
      // They snapshot every SNAPSHOT_COUNT entries: by now their logs hold no request of 3.5 (prepare would refuse 3.7 otherwise).
      await logClean('etcd-1');
      await restartOn('etcd-1', v37);
      await logClean('etcd-2');
      await restartOn('etcd-2', v37);
      await clusterVersionBecomes('3.7.0');
    },
    patience(60_000),
  );

  it(
    'when a member with 3.7 data is started under 3.5, then prepare and its start script refuse it with one line that health names, nothing is lost, and 3.7 brings it back',
    async () => {
      const name = 'etcd-2';
      const member = cluster.member(name);
      restarting = name;
      const { stopAt, exitedAt, window } = await stopUntilFurtherNotice(name);
      expect(readDataVersions(member.dataDir)).toEqual({ storage: '3.7.0', cluster: '3.7.0' });

      // What etcd 3.5 does by itself: a fatal line among its JSON logs, exit 1; the kubelet would restart it forever.
      let from = fs.statSync(member.logFile).size;
      await cluster.restart(name, { etcd: v35, wait: false });
      expect(await cluster.waitForExit(name)).toBe('code 1');
      const alone = logSince(member.logFile, from);
      expect(alone).toContain('invalid downgrade; server version is lower than determined cluster version');
      findings.push(
        `etcd ${v35.version} alone on 3.7 data: exit 1 after ${alone.trimEnd().split('\n').length} log lines, "invalid downgrade; server version is lower than determined cluster version"`,
      );

      // The pod's way: prepare (the init container), then the start script under busybox, with the 3.5 binary.
      const prepared = await prepare(name);
      expect(prepared.code).toBe(0);
      expect(prepared.prepared).toMatchObject({
        state: 'existing',
        dataVersions: { storage: '3.7.0', cluster: '3.7.0' },
        etcdVersions: '3.7 to 3.8',
      });
      from = fs.statSync(member.logFile).size;
      await cluster.restart(name, { etcd: v35, wait: false, launcher: startScript(name, v35) });
      expect(await cluster.waitForExit(name)).toBe('code 1');
      const refusedAt = Date.now();
      const refusal = `etcd ${v35.version} cannot run data written by 3.7; upgrade the image or restore`;
      expect(logSince(member.logFile, from)).toBe(`etcd-lifecycle-agent: ${refusal}\n`);
      expect(fs.readFileSync(noteFile(name), 'utf8')).toBe(`${refusal}\n`);
      findings.push(`etcd ${v35.version} through prepare and the start script: exit 1, one line: "${refusal}"`);

      // Health names it, in every answer observed since: the member's own agent, locally and for the
      // cluster; the caller's agent sees it degraded.
      const local = await observedSince(agentUrl(name), '/v1/health/local', refusedAt);
      expect(local.status).toBe(503);
      expect(local.json.errors[0]).toBe(refusal);
      const health = await observedSince(agentUrl(name), '/v1/health', refusedAt);
      expect(health.json.status).toBe('degraded');
      expect(health.json.errors).toContain(`${name}: ${refusal}`);
      expect(health.json.members.find((m: { name: string }) => m.name === name).errors[0]).toBe(refusal);
      const other = await get(agentUrl('etcd-0'), '/v1/health');
      expect(other.json.status).toBe('degraded');
      expect(readDataVersions(member.dataDir)).toEqual({ storage: '3.7.0', cluster: '3.7.0' });

      // The 3.7 image back (a new pod: prepare again), through the same script.
      expect((await prepare(name)).code).toBe(0);
      window.to = Date.now();
      await cluster.restart(name, { etcd: v37, wait: false, launcher: startScript(name, v37) });
      const back = await waitHealthy(window.to);
      restarting = undefined;
      restarts.push({
        member: name,
        from: `${v37.version} (refused ${v35.version})`,
        to: v37.version,
        stopAt,
        exitedAt,
        spawnedAt: window.to,
        backAt: back.at,
      });
      expect(fs.readFileSync(noteFile(name), 'utf8')).toBe('');
      // Its own agent says ready too, in an answer observed since: the caller's agent saw it back
      // first, and each agent reconnects to a member on its own.
      await eventually(
        async () => {
          const local = await observedSince(agentUrl(name), '/v1/health/local', back.observedAt ?? back.at);
          expect({ status: local.status, errors: local.json.errors }).toEqual({ status: 200, errors: [] });
        },
        { within: 10_000, every: 100 },
      );
    },
    patience(60_000),
  );

  it('through all of it, health was never healthy while a member was stopped, and roleProbe named no role for a stopped member', () => {
    const healthyWhileStopped = caller.health.filter(
      (a) => a.status === 'healthy' && a.observedAt !== undefined && stopped.some((w) => a.observedAt! >= w.from && a.observedAt! <= w.to),
    );
    expect(healthyWhileStopped).toEqual([]);
    for (const w of stopped) {
      const during = caller.health.filter((a) => a.observedAt !== undefined && a.observedAt >= w.from && a.observedAt <= w.to);
      expect(during.length).toBeGreaterThan(0);
      expect(during.every((a) => a.status === 'degraded' || a.status === 'unavailable')).toBe(true);
    }
    // roleProbe reads this pod's role from the shared observation, which may have begun just before
    // the stop and serves for the max age (README: the role may lag a change by up to it): a probe
    // sent that long after the stop must name no role.
    const probedWhileStopped = caller.roles.filter((r) =>
      stopped.some((w) => w.member === r.agent && r.sentAt >= w.from + ROLE_MAX_AGE_MS && r.at <= w.to),
    );
    // There were such probes: each restart waits for one before the member starts again.
    expect(probedWhileStopped.length).toBeGreaterThan(0);
    expect(probedWhileStopped.filter((r) => r.role !== undefined)).toEqual([]);
  });

  it('when each member was stopped, then its data directory recorded the versions prepare reads', () => {
    const byStep = recorded.map((r) => `${r.member} ${r.version}: ${JSON.stringify(r.versions)}`);
    expect(byStep).toEqual([
      `etcd-0 ${v35.version}: {"cluster":"3.5.0"}`,
      `etcd-1 ${v35.version}: {"cluster":"3.5.0"}`,
      `etcd-2 ${v35.version}: {"cluster":"3.5.0"}`,
      `etcd-0 ${v36.version}: {"storage":"3.6.0","cluster":"3.6.0"}`,
      `etcd-1 ${v36.version}: {"storage":"3.6.0","cluster":"3.6.0"}`,
      `etcd-2 ${v36.version}: {"storage":"3.6.0","cluster":"3.6.0"}`,
    ]);
  });

  it.each<[string, DataVersions, number]>([
    ['3.5 data', { cluster: '3.5.0' }, 2],
    ['3.6 data whose log holds requests of 3.5', { storage: '3.6.0', cluster: '3.6.0' }, 2],
    ['3.6 data', { storage: '3.6.0', cluster: '3.6.0' }, 0],
    ['3.7 data', { storage: '3.7.0', cluster: '3.7.0' }, 0],
  ])(
    "when the start script's check of %s runs with each real etcd binary, under busybox and dash, then it does what gateRefusal says",
    (_what, versions, v2Entries) => {
      const gate = versionGate(versions, v2Entries);
      if (gate === undefined) throw new Error('no gate');
      const dir = path.join(runDir, 'check');
      fs.mkdirSync(dir, { recursive: true });
      const file = path.join(dir, 'etcd-flags.sh');
      const note = path.join(dir, 'etcd-start-note');
      fs.writeFileSync(file, [...gateLines(gate), flagLine('--initial-cluster-token=started'), ''].join('\n'));
      const installs = [etcdInstallOf('3.4'), v35, v36, v37];
      const script = installStartScript(file, path.join(dir, 'data'));
      for (const shell of [[BUSYBOX, 'sh'], ['/bin/sh']]) {
        for (const install of installs) {
          const want = gateRefusal(gate, install.version);
          // etcd's binary for the script: the real etcd when asked its version, `echo would start` for the start itself.
          const binary = path.join(dir, `etcd-${install.version}`);
          fs.writeFileSync(binary, `#!/bin/sh\n[ "$1" = --version ] && exec ${install.etcd} --version\necho would start "$@"\n`, {
            mode: 0o755,
          });
          let out: string;
          try {
            // The whole start script, as installed, run as the etcd container's command runs it.
            out = execFileSync(shell[0], [...shell.slice(1), script, binary, '--x'], {
              encoding: 'utf8',
              stdio: ['ignore', 'pipe', 'pipe'],
            });
          } catch (err) {
            const failed = err as { status: number; stderr: string };
            expect([shell[0], install.version, failed.status, failed.stderr]).toEqual([
              shell[0],
              install.version,
              1,
              `etcd-lifecycle-agent: ${want}\n`,
            ]);
            expect(fs.readFileSync(note, 'utf8')).toBe(`${want}\n`);
            continue;
          }
          expect([shell[0], install.version, out]).toEqual([
            shell[0],
            install.version,
            want === undefined ? 'would start --x --initial-cluster-token=started\n' : 'refused',
          ]);
          expect(fs.readFileSync(note, 'utf8')).toBe('');
        }
      }
    },
  );

  it(
    'at the end, every acknowledged write reads back',
    async () => {
      await writer.stop();
      const stored = await readPrefix(cluster.member('etcd-0').clientURL, writer.prefix);
      const lost = writer.acks.filter((a) => stored.get(writer.key(a.n)) !== String(a.n));
      expect(writer.acks.length).toBeGreaterThan(100);
      expect(lost).toEqual([]);
    },
    patience(30_000),
  );

  /** Runs `prepare` (the built bin, as the init container does) for stopped member `name`; answers its exit code and its `prepared` line. */
  async function prepare(name: string): Promise<{ code: number | null; prepared?: Record<string, unknown>; output: string; ms: number }> {
    const started = Date.now();
    const member = cluster.member(name);
    const env = {
      PATH: process.env.PATH,
      ETCD_AGENT_LISTEN: '127.0.0.1:0',
      ETCD_AGENT_MEMBER_NAME: name,
      ETCD_AGENT_ENDPOINTS: CORE.filter((n) => n !== name)
        .map((n) => cluster.member(n).clientURL)
        .join(','),
      ETCD_AGENT_PEER_URL: member.peerURL,
      ETCD_AGENT_DATA_DIR: member.dataDir,
      ETCD_AGENT_PREPARE_FLAGS_FILE: flagsFile(name),
      ETCD_AGENT_START_NOTE_FILE: noteFile(name),
      ETCD_AGENT_PREPARE_WAIT_SECONDS: '20',
    };
    const [node, argv] = binCommand(main, ['prepare']);
    const child = spawn(node, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    const prepared = output
      .split('\n')
      .flatMap((line) => {
        try {
          return [JSON.parse(line) as Record<string, unknown>];
        } catch {
          return [];
        }
      })
      .find((line) => line.message === 'prepared');
    return { code, prepared, output, ms: Date.now() - started };
  }

  /**
   * The etcd container's command in kube-inject's pods: busybox sh running the start script prepare
   * installed beside the flags file, etcd's binary its first argument (etcd as its child, with the
   * flags and version gate prepare wrote). The cluster puts etcd's path and arguments after these
   * words; the first word drops that path for a wrapper of it.
   */
  function startScript(name: string, etcd: EtcdInstall): string[] {
    // etcd runs as the script's child: with setpriv, the kernel kills it when the script dies, as the harness's own etcd.
    const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((f) => fs.existsSync(f));
    const binary = path.join(runDir, name, `etcd-${etcd.version}`);
    const exec = setpriv === undefined ? etcd.etcd : `${setpriv} --pdeathsig=KILL -- ${etcd.etcd}`;
    fs.writeFileSync(binary, `#!${BUSYBOX} sh\nexec ${exec} "$@"\n`, { mode: 0o755 });
    const script = startScriptPath(flagsFile(name));
    if (!fs.existsSync(script)) throw new Error(`${script} is missing: prepare installs it, and every start here follows a prepare`);
    // `sh -c CMD etcd ARGS…`: etcd's path is $0 and is dropped; exec keeps the pid the cluster watches.
    return [BUSYBOX, 'sh', '-c', `exec ${BUSYBOX} sh ${script} ${binary} "$@"`];
  }

  /**
   * GETs `route` of the agent at `url` until an answer's observation began at or after `since` (an
   * answer may come from a shared observation up to the max age old); that answer.
   */
  async function observedSince(url: string, route: string, since: number, withinMs = 10_000): Promise<Answer> {
    return eventually(
      async () => {
        const answer = await get(url, route);
        if (!(Date.parse(String(answer.json?.observedAt)) >= since))
          throw new Error(`no answer of ${route} observed since ${new Date(since).toISOString()}: ${answer.text.slice(0, 300)}`);
        return answer;
      },
      { within: withinMs, every: 100 },
    );
  }

  /** What `file` got after its first `from` bytes. */
  function logSince(file: string, from: number): string {
    return fs.readFileSync(file).subarray(from).toString('utf8');
  }

  /** Waits until member `name`'s log holds no request of etcd 3.5 after its last snapshot (it took one since). */
  async function logClean(name: string, withinMs = 20_000): Promise<void> {
    await eventually(
      () => {
        const tail = scanWal(cluster.member(name).dataDir);
        if (tail?.v2Entries !== 0) throw new Error(`${name}'s log still holds ${tail?.v2Entries} requests of 3.5`);
      },
      { within: withinMs, every: 200 },
    );
  }
});
