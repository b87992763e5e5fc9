/**
 * `etcd-lifecycle-agent prepare`: the shell around `decidePrepare`. It reads
 * the facts (data directory, marker, the member list through a quorum, the
 * peers' answers when nothing else answers), takes the one step decided, and
 * reads again, until etcd's start flags are written (exit 0) or the wait runs
 * out (exit 1, one line saying why). Joins and removals go through the same
 * MembershipService the agent serves, in this process: prepare runs before
 * the pod's sidecar exists, and a peer's agent would refuse an unauthenticated
 * remote call (CONTRACT §6); in-process it gets the same lock, the same
 * idempotent join (learner first, one learner at a time) and the same quorum
 * gate on removals.
 *
 * Crash safety: every step is re-derived from what etcd and the disk say, the
 * flags file is written last and atomically, and the bootstrap marker is
 * written before the flags that start `new`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { crashPoint } from '../lib/crash-point';
import { Deadline } from '../lib/deadline';
import { pollUntil } from '../lib/poll';
import { EtcdCluster } from '../etcd/cluster-client';
import { connectionOptions } from '../etcd/connection-options';
import { fetchPeerMembers } from '../etcd/peer-members';
import { QuorumGate } from '../membership/quorum-gate';
import { MembershipService } from '../membership/service';
import type { Logger } from '../observability/logger';
import { createMetrics } from '../observability/metrics';
import { isAgentError } from '../proto/errors';
import { askPeers, AnswerServer, serveAnswer } from './answer-server';
import { asideTarget, BOOTSTRAP_MARKER, DataVersions, moveAside, readDataDir, readDataVersions, writeFileAtomic } from '../etcd-data/data-dir';
import { EtcdStartControl, flagLine } from './etcd-control';
import { BootstrapPlan, decidePrepare, initialClusterOf, PrepareFacts, PrepareStep, samePlan } from './decide';
import type { PrepareOptions } from './options';
import { formatMinor, gateLines, VersionGate, versionGate } from './version-gate';
import { scanWal } from '../etcd-data/wal-scan';

/** Pause between passes while waiting. */
const PASS_PAUSE_MS = 500;
/** How long one read of the member list may take before the cluster counts as not answering. */
const LIST_TIMEOUT_MS = 3000;
/** The least time the no-quorum look of prepare gives each Status call. */
const PREPARE_STATUS_MS = 800;
/** After deciding `new`, keep answering until every initial peer was seen deciding (or running etcd), at most this long. */
const LINGER_MAX_MS = 10_000;
/** …and at least this long, so the last to decide is seen by the others. */
const LINGER_MIN_MS = 1500;

/** Where the bootstrap marker of a data directory lives: inside it (see BOOTSTRAP_MARKER). */
export function markerPath(dataDir: string): string {
  return path.join(dataDir, BOOTSTRAP_MARKER);
}

/**
 * The start flags, one `set -- "$@" '<flag>'` line each, after the version gate's lines when the data
 * directory records versions (version-gate.ts `gateLines`): kube-inject's start script reads them as
 * data (kube-inject-prepare.ts `etcdStartScript`), and a shell that sources the file gets the same
 * arguments (the last flag wins in etcd) and reads the gate as comments.
 */
export function flagsFileContent(step: Extract<PrepareStep, { kind: 'start' }>, token: string, name: string, at: Date, gate?: VersionGate): string {
  const flags = [`--initial-cluster=${step.initialCluster}`, `--initial-cluster-state=${step.state}`, `--initial-cluster-token=${token}`];
  return [
    `# written by etcd-lifecycle-agent prepare for ${name} at ${at.toISOString()}`,
    `# ${step.reason.replace(/\n/g, ' ')}`,
    ...(gate === undefined ? [] : gateLines(gate)),
    ...flags.map(flagLine),
    '',
  ].join('\n');
}

/**
 * The version gate of the data directory etcd starts on (its recorded versions, and the requests of
 * etcd 3.5 its log holds after the last snapshot), or undefined when it records no version. A part
 * that cannot be read is logged and left out: the start is never blocked by our own reader.
 */
function dataGate(dataDir: string, logger: Logger): { gate: VersionGate | undefined; recorded: DataVersions & { v2Entries?: number } } {
  const attempt = <T>(what: string, read: () => T): T | undefined => {
    try {
      return read();
    } catch (err) {
      logger.warn(`cannot read ${what}; the etcd container's version check goes without it`, { dataDir, error: err instanceof Error ? err.message : String(err) });
      return undefined;
    }
  };
  const versions = attempt('the versions the data directory records', () => readDataVersions(dataDir)) ?? {};
  const v2Entries = attempt('the write-ahead log', () => scanWal(dataDir))?.v2Entries ?? 0;
  return { gate: versionGate(versions, v2Entries), recorded: { ...versions, ...(v2Entries > 0 ? { v2Entries } : {}) } };
}

/** Runs prepare to its end; resolves to the exit code (0 flags written, 1 not decided in time). */
export async function runPrepare(opts: PrepareOptions, logger: Logger): Promise<number> {
  const { config } = opts;
  const cluster = new EtcdCluster(connectionOptions(config, logger));
  // Without a quorum the member list read answers at once, naming the figures: the reason prepare waits.
  // An init container is in no hurry: its look at the voters gets at least 800 ms per Status (a loaded
  // node's 500 ms answers left it undecided, and the pass said "did not answer in time" without figures).
  const gate = new QuorumGate({ cluster, config: { statusTimeoutMs: Math.max(config.statusTimeoutMs, PREPARE_STATUS_MS) }, logger });
  const membership = new MembershipService({ cluster, config, logger, metrics: createMetrics({ defaultMetrics: false }), gate });
  let server: AnswerServer | undefined;
  try {
    // Without the answer (the port taken, e.g. prepare run beside a running sidecar) the peers read
    // "no answer" and never bootstrap with this pod: safe, only slower.
    server = await serveAnswer(config.listen.host, config.listen.port, () => ({
      name: opts.self.name,
      dataDir: readDataDir(opts.dataDir).kind,
      bootstrap: readMarker(opts.dataDir) ?? null,
    })).catch((err: unknown) => {
      logger.warn('cannot serve the prepare answer; the other initial members will not count this pod as empty', {
        listen: `${config.listen.host}:${config.listen.port}`,
        error: err instanceof Error ? err.message : String(err),
      });
      return undefined;
    });
    const outcome = await preparePasses(opts, { cluster, membership, gate, logger }, { until: Date.now() + opts.waitSeconds * 1000 });
    if (outcome.prepared) return 0;
    logger.error('prepare cannot decide safely yet; exiting so the init container runs it again', { member: opts.self.name, reason: outcome.reason });
    return 1;
  } finally {
    await server?.close();
    await membership.close();
    cluster.close();
  }
}

/** What prepare's passes need: the cluster client and membership service of the process running them. */
export interface PrepareDeps {
  cluster: EtcdCluster;
  membership: MembershipService;
  /** Answers the member list read at once without a quorum, with the figures (membership/quorum-gate.ts); else a plain read. */
  gate?: QuorumGate;
  logger: Logger;
}

/** How far the passes went: flags written (`prepared`), or why not by `until`. */
export type PassesOutcome = { prepared: true; step: Extract<PrepareStep, { kind: 'start' }> } | { prepared: false; reason: string };

/**
 * Prepare's passes until etcd's start flags are written or `until`: read the facts, take the one step
 * decided, read again. Run by the init container (runPrepare), and by the sidecar while it holds its
 * pod's etcd stopped (`sidecar`: it then never bootstraps a new cluster and asks no peers, and writes
 * a decided one-shot flag, e.g. `--force-new-cluster` for an ordered `recovery`).
 */
export async function preparePasses(
  opts: PrepareOptions,
  deps: PrepareDeps,
  run: { until: number; sidecar?: boolean; recovery?: { clusterId: string }; control?: EtcdStartControl },
): Promise<PassesOutcome> {
  const { logger } = deps;
  const plan: BootstrapPlan = { initialCluster: initialClusterOf(opts.initial), token: opts.token };
  let lastReason = '';
  let reason = '';
  let done: Extract<PrepareStep, { kind: 'start' }> | undefined;
  // A pass that acted goes on at once (its effect is read by the next pass); one that waits pauses.
  await pollUntil({ until: run.until, pauseMs: () => (reason !== '' ? PASS_PAUSE_MS : 0) }, async () => {
    let step = await nextStep(opts, deps.cluster, deps.gate, run);
    if (run.sidecar === true && (step.kind === 'ask-peers' || (step.kind === 'start' && step.state === 'new'))) {
      step = { kind: 'wait', reason: 'no cluster answers; a running pod never bootstraps a new cluster (only its init container may)' };
    }
    if (step.kind === 'start') {
      if (step.state === 'new' && !samePlan(readMarker(opts.dataDir) ?? { initialCluster: '', token: '' }, plan)) {
        writeFileAtomic(markerPath(opts.dataDir), `${JSON.stringify(plan)}\n`);
      }
      // Once etcd has written its WAL the marker has done its work: without it, a later loss of the
      // member directory alone cannot pass for "decided, never started". (The sidecar mounts the data
      // read-only and never bootstraps: it leaves a marker to the next init container.)
      if (step.state === 'existing' && run.sidecar !== true) fs.rmSync(markerPath(opts.dataDir), { force: true });
      if (step.once !== undefined) {
        if (run.control === undefined) throw new Error(`a one-shot start (${step.once.join(' ')}) needs the start script's control files`);
        run.control.writeOnce(step.once, step.reason);
      } else {
        run.control?.dropOnce();
      }
      // Only a directory etcd has written records versions; a new or joining member's is empty.
      const { gate, recorded } = step.state === 'existing' ? dataGate(opts.dataDir, logger) : { gate: undefined, recorded: {} };
      writeFileAtomic(opts.flagsFile, flagsFileContent(step, opts.token, opts.self.name, new Date(), gate));
      crashPoint('prepare-flags-written');
      logger.info('prepared', {
        member: opts.self.name,
        state: step.state,
        initialCluster: step.initialCluster,
        reason: step.reason,
        flagsFile: opts.flagsFile,
        dataVersions: recorded,
        ...(gate === undefined ? {} : { etcdVersions: `${formatMinor(gate.oldest)} to ${formatMinor(gate.newest)}` }),
        ...(step.once === undefined ? {} : { once: step.once }),
      });
      if (step.state === 'new') await linger(opts, plan, logger);
      done = step;
      return true;
    }
    if (step.kind === 'wait') {
      reason = step.reason;
    } else {
      logger.info('prepare step', { member: opts.self.name, step: step.kind, reason: 'reason' in step ? step.reason : '' });
      reason = await act(step, opts, deps.membership, logger, mover(opts, run));
    }
    if (reason !== '' && reason !== lastReason) logger.info('waiting', { member: opts.self.name, reason });
    lastReason = reason || lastReason;
    return undefined;
  });
  return done !== undefined ? { prepared: true, step: done } : { prepared: false, reason: lastReason || 'the wait ran out' };
}

/** Reads the facts and decides, asking the peers only when the decision needs them. */
async function nextStep(opts: PrepareOptions, cluster: EtcdCluster, gate: QuorumGate | undefined, run: { sidecar?: boolean; recovery?: { clusterId: string } }): Promise<PrepareStep> {
  const facts: PrepareFacts = {
    self: opts.self,
    dataDir: readDataDir(opts.dataDir),
    marker: readMarker(opts.dataDir),
    cluster: await readCluster(cluster, gate),
    initial: opts.initial,
    token: opts.token,
    ...(run.recovery === undefined ? {} : { recovery: run.recovery }),
  };
  const step = decidePrepare(facts);
  if (step.kind !== 'ask-peers' || run.sidecar === true) return step;
  const others = opts.initial.filter((m) => m.name !== opts.self.name);
  return decidePrepare({ ...facts, peers: await askPeers(others, opts.config.listen.port, 1000) });
}

async function readCluster(cluster: EtcdCluster, gate: QuorumGate | undefined): Promise<PrepareFacts['cluster']> {
  try {
    const read = (d: Deadline): ReturnType<EtcdCluster['listMembers']> => cluster.listMembers(d);
    const list = await (gate === undefined ? read(Deadline.in(LIST_TIMEOUT_MS)) : gate.through(Deadline.in(LIST_TIMEOUT_MS), 'reading the member list', read));
    return { kind: 'answered', list };
  } catch (err) {
    return { kind: 'unreachable', reason: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * How a data directory is moved aside: by prepare itself in the init container (which runs as etcd's
 * user), by etcd's own start script in the sidecar, which mounts etcd's data read-only and holds etcd
 * stopped meanwhile. Answers the new path, or undefined when the move is not done yet.
 */
function mover(opts: PrepareOptions, run: { until: number; sidecar?: boolean; control?: EtcdStartControl }): () => Promise<string | undefined> {
  const control = run.control;
  if (run.sidecar !== true || control === undefined) return async () => moveAside(opts.dataDir);
  return async () => {
    const target = asideTarget(opts.dataDir);
    return (await control.moveAside(opts.dataDir, target, Math.min(run.until, Date.now() + 5000))) ? target : undefined;
  };
}

/** Takes one step; answers why to wait before the next pass, or '' to go on at once. */
async function act(step: PrepareStep, opts: PrepareOptions, membership: MembershipService, logger: Logger, move: () => Promise<string | undefined>): Promise<string> {
  try {
    switch (step.kind) {
      case 'move-aside': {
        const target = await move();
        if (target === undefined) return `waiting for etcd's start script to move ${opts.dataDir} aside (it does so while etcd is held)`;
        logger.warn('moved the data directory aside, not deleted', { member: opts.self.name, from: opts.dataDir, to: target, reason: step.reason });
        crashPoint('prepare-moved-aside');
        return '';
      }
      case 'join': {
        const result = await membership.join({ name: opts.self.name, peerURLs: [opts.self.peerURL], learner: true }, { requestId: 'prepare' });
        logger.info('joined', { member: opts.self.name, outcome: result.outcome, id: result.member?.id, isLearner: result.member?.isLearner });
        crashPoint('prepare-joined');
        return '';
      }
      case 'replace': {
        const result = await membership.leave({ id: step.member.id }, { requestId: 'prepare' });
        logger.info('removed the member of the lost data directory', { member: opts.self.name, id: step.member.id, outcome: result.outcome });
        return '';
      }
      default:
        return '';
    }
  } catch (err) {
    // Refusals time lifts (busy: another learner; unsafe: quorum or etcd's 5 s health rule) are waited out.
    if (isAgentError(err) && err.retryable) return `${step.kind}: ${err.message}`;
    throw err;
  }
}

/** Keeps the answer served after deciding `new`, until each initial peer was seen deciding too. */
async function linger(opts: PrepareOptions, plan: BootstrapPlan, logger: Logger): Promise<void> {
  const started = Date.now();
  const waiting = new Set(opts.initial.map((m) => m.name).filter((n) => n !== opts.self.name));
  const allSeen = await pollUntil({ until: started + LINGER_MAX_MS, pauseMs: 250 }, async () => {
    const peers = opts.initial.filter((m) => waiting.has(m.name));
    const answers = await askPeers(peers, opts.config.listen.port, 500);
    for (const [name, answer] of answers) if (answer.kind === 'bootstrap' && samePlan(answer.plan, plan)) waiting.delete(name);
    // A peer whose etcd already serves its peer listener has decided and gone on: no need to wait for it.
    await Promise.all(peers.map(async (m) => ((await peerEtcdAnswers(m.peerURL)) ? waiting.delete(m.name) : undefined)));
    return waiting.size === 0 && Date.now() - started >= LINGER_MIN_MS ? true : undefined;
  });
  if (allSeen === true) return;
  logger.info('stopped waiting for the other initial members to decide', { member: opts.self.name, notSeen: [...waiting] });
}

/**
 * Whether an etcd serves `GET <peer URL>/members` (every member does, even without a quorum). Over
 * node:http, not `fetch`: fetch refuses the Fetch standard's "bad ports" (6000, 10080, …) without
 * connecting, and a peer URL may name any port.
 */
function peerEtcdAnswers(peerURL: string): Promise<boolean> {
  return fetchPeerMembers(peerURL, 500).then(
    () => true,
    () => false,
  );
}

function readMarker(dataDir: string): BootstrapPlan | undefined {
  try {
    const parsed = JSON.parse(fs.readFileSync(markerPath(dataDir), 'utf8')) as Partial<BootstrapPlan>;
    return typeof parsed.initialCluster === 'string' && typeof parsed.token === 'string'
      ? { initialCluster: parsed.initialCluster, token: parsed.token }
      : undefined;
  } catch {
    return undefined;
  }
}
