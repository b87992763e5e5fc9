/**
 * `etcd-lifecycle-agent prepare`: the shell around `decidePrepare`. It reads
 * the facts (data directory, marker, the member list through a quorum, the
 * peers' answers when nothing else answers), takes the one step decided, and
 * reads again, until etcd's start flags are written (exit 0) or the wait runs
 * out (exit 1, one line saying why). Joins and removals go through the same
 * MembershipService the agent serves, in this process: prepare runs before
 * the pod's sidecar exists, and a peer's agent would refuse an unauthenticated
 * remote call (docs/api.md §6); in-process it gets the same lock, the same
 * idempotent join (learner first, one learner at a time) and the same quorum
 * gate on removals.
 *
 * Crash safety: every step is re-derived from what etcd and the disk say; the
 * files a start writes, and in which order, are in start-files.ts; a restore's
 * own steps and what a crash in them leaves are in backup/restore.ts.
 */
import { RestoreError } from '../backup/restore';
import type { RestoreTool } from '../backup/restore-tool';
import { crashPoint } from '../lib/crash-point';
import { Deadline } from '../lib/deadline';
import { pollUntil } from '../lib/poll';
import { EtcdCluster } from '../etcd/cluster-client';
import { connectionOptions } from '../etcd/connection-options';
import { QuorumGate } from '../membership/quorum-gate';
import { MembershipService } from '../membership/service';
import type { Logger } from '../observability/logger';
import { createMetrics } from '../observability/metrics';
import { isAgentError } from '../proto/errors';
import { askPeers, AnswerServer, serveAnswer } from './answer-server';
import { cleanUpAsides } from './aside-cleanup';
import { asideTarget, moveAside, readDataDir } from '../etcd-data/data-dir';
import type { EtcdStartControl } from './etcd-control';
import { BootstrapPlan, decidePrepare, initialClusterOf, PrepareFacts, PrepareStep } from './decide';
import { linger } from './linger';
import type { PrepareOptions } from './options';
import { readMarker, StartStep, writeStart } from './start-files';
import { actRestore, clearRestoreLeftover, NoRestoreToolError, restoreAnswer, restoreToolOf } from './restore-step';
import { installStartScript } from './start-script';

/** Pause between passes while waiting. */
const PASS_PAUSE_MS = 500;
/** How long one read of the member list may take before the cluster counts as not answering. */
const LIST_TIMEOUT_MS = 3000;
/** The least time the no-quorum look of prepare gives each Status call. */
const PREPARE_STATUS_MS = 800;
/** Longest wait for each initial peer's prepare answer when the decision needs them. */
const PEER_ASK_MS = 1000;
/** Longest wait, within the passes' own, for etcd's start script to move a data directory aside. */
const MOVE_ASIDE_WAIT_MS = 5000;

/**
 * Runs prepare to its end; resolves to the exit code (0 flags written, 1 not decided in time, 2 a
 * restore decided without a usable restore tool).
 */
export async function runPrepare(opts: PrepareOptions, logger: Logger): Promise<number> {
  const { config } = opts;
  // The restore tool is needed only once a restore is decided: a pod whose data is there starts
  // without one, even with the restore setting left in place. Looked for once.
  let toolFound: Promise<RestoreTool | 'bad'> | undefined;
  const restoreTool = (): Promise<RestoreTool | 'bad'> => (toolFound ??= restoreToolOf(opts, logger));
  // First, whatever is decided: the etcd container's command runs this script (start-script.ts), and
  // each start of the pod brings the one of the agent's image it runs.
  installStartScript(opts.flagsFile, opts.dataDir);
  const cluster = new EtcdCluster(connectionOptions(config, logger));
  // Without a quorum the member list read answers at once, naming the figures: the reason prepare waits.
  // An init container is in no hurry: its look at the voters gives each Status at least
  // PREPARE_STATUS_MS, so that answers from a slow node still count and a pass names the figures.
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
      restore: restoreAnswer(opts),
    })).catch((err: unknown) => {
      logger.warn('cannot serve the prepare answer; the other initial members will not count this pod as empty', {
        listen: `${config.listen.host}:${config.listen.port}`,
        error: err instanceof Error ? err.message : String(err),
      });
      return undefined;
    });
    await clearRestoreLeftover(opts, logger);
    const outcome = await preparePasses(
      opts,
      { cluster, membership, gate, logger, restoreTool },
      { until: Date.now() + opts.waitSeconds * 1000 },
    );
    if (outcome.prepared) {
      // Once etcd's start is decided: copies moved aside at earlier starts that are no longer needed go.
      await cleanUpAsides(opts, cluster, logger);
      return 0;
    }
    logger.error('prepare cannot decide safely yet; exiting so the init container runs it again', {
      member: opts.self.name,
      reason: outcome.reason,
    });
    return 1;
  } catch (err) {
    // Logged where it was found (restore-step.ts), before the restore changed anything.
    if (err instanceof NoRestoreToolError) return 2;
    if (!(err instanceof RestoreError)) throw err;
    logger.error('the restore failed; the data directory is as it was', { member: opts.self.name, step: err.step, reason: err.message });
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
  /** Finds the restore tool once a restore is decided (init container only); `bad` when none can be used. */
  restoreTool?: () => Promise<RestoreTool | 'bad'>;
}

/** How far the passes went: flags written (`prepared`), or why not by `until`. */
export type PassesOutcome = { prepared: true; step: StartStep } | { prepared: false; reason: string };

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
  let done: StartStep | undefined;
  // A pass that acted goes on at once (its effect is read by the next pass); one that waits pauses.
  await pollUntil({ until: run.until, pauseMs: () => (reason !== '' ? PASS_PAUSE_MS : 0) }, async () => {
    let step = await nextStep(opts, deps.cluster, deps.gate, run);
    if (run.sidecar === true && (step.kind === 'ask-peers' || step.kind === 'restore' || (step.kind === 'start' && step.state === 'new'))) {
      step = {
        kind: 'wait',
        reason: 'no cluster answers; a running pod never bootstraps or restores a new cluster (only its init container may)',
      };
    }
    if (step.kind === 'start') {
      writeStart(opts, step, plan, run, logger);
      if (step.state === 'new') await linger(opts, plan, logger);
      done = step;
      return true;
    }
    if (step.kind === 'wait') {
      reason = step.reason;
    } else {
      logger.info('prepare step', { member: opts.self.name, step: step.kind, reason: 'reason' in step ? step.reason : '' });
      reason = await act(step, opts, deps, mover(opts, run));
    }
    if (reason !== '' && reason !== lastReason) logger.info('waiting', { member: opts.self.name, reason });
    lastReason = reason || lastReason;
    return undefined;
  });
  return done !== undefined ? { prepared: true, step: done } : { prepared: false, reason: lastReason || 'the wait ran out' };
}

/** Reads the facts and decides, asking the peers only when the decision needs them. */
async function nextStep(
  opts: PrepareOptions,
  cluster: EtcdCluster,
  gate: QuorumGate | undefined,
  run: { sidecar?: boolean; recovery?: { clusterId: string } },
): Promise<PrepareStep> {
  const facts: PrepareFacts = {
    self: opts.self,
    dataDir: readDataDir(opts.dataDir),
    marker: readMarker(opts.dataDir),
    cluster: await readCluster(cluster, gate),
    initial: opts.initial,
    token: opts.token,
    ...(run.recovery === undefined ? {} : { recovery: run.recovery }),
    ...(opts.restore === undefined || run.sidecar === true ? {} : { restore: opts.restore }),
  };
  const step = decidePrepare(facts);
  if (step.kind !== 'ask-peers' || run.sidecar === true) return step;
  const others = opts.initial.filter((m) => m.name !== opts.self.name);
  return decidePrepare({ ...facts, peers: await askPeers(others, opts.config.listen.port, PEER_ASK_MS) });
}

async function readCluster(cluster: EtcdCluster, gate: QuorumGate | undefined): Promise<PrepareFacts['cluster']> {
  try {
    const read = (d: Deadline): ReturnType<EtcdCluster['listMembers']> => cluster.listMembers(d);
    const list = await (gate === undefined
      ? read(Deadline.in(LIST_TIMEOUT_MS))
      : gate.through(Deadline.in(LIST_TIMEOUT_MS), 'reading the member list', read));
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
function mover(
  opts: PrepareOptions,
  run: { until: number; sidecar?: boolean; control?: EtcdStartControl },
): () => Promise<string | undefined> {
  const control = run.control;
  if (run.sidecar !== true || control === undefined) return async () => moveAside(opts.dataDir);
  return async () => {
    const target = asideTarget(opts.dataDir);
    return (await control.moveAside(opts.dataDir, target, Math.min(run.until, Date.now() + MOVE_ASIDE_WAIT_MS))) ? target : undefined;
  };
}

/** Takes one step; answers why to wait before the next pass, or '' to go on at once. */
async function act(step: PrepareStep, opts: PrepareOptions, deps: PrepareDeps, move: () => Promise<string | undefined>): Promise<string> {
  const { membership, logger } = deps;
  try {
    switch (step.kind) {
      case 'move-aside': {
        const target = await move();
        if (target === undefined) return `waiting for etcd's start script to move ${opts.dataDir} aside (it does so while etcd is held)`;
        logger.warn('moved the data directory aside, not deleted', {
          member: opts.self.name,
          from: opts.dataDir,
          to: target,
          reason: step.reason,
        });
        crashPoint('prepare-moved-aside');
        return '';
      }
      case 'join': {
        const result = await membership.join(
          { name: opts.self.name, peerURLs: [opts.self.peerURL], learner: true },
          { requestId: 'prepare' },
        );
        logger.info('joined', {
          member: opts.self.name,
          outcome: result.outcome,
          id: result.member?.id,
          isLearner: result.member?.isLearner,
        });
        crashPoint('prepare-joined');
        return '';
      }
      case 'restore': {
        const tool = await deps.restoreTool?.();
        if (tool === 'bad') throw new NoRestoreToolError();
        return await actRestore(opts, tool, logger);
      }
      case 'replace': {
        const result = await membership.leave({ id: step.member.id }, { requestId: 'prepare' });
        logger.info('removed the member of the lost data directory', {
          member: opts.self.name,
          id: step.member.id,
          outcome: result.outcome,
        });
        return '';
      }
      default:
        return '';
    }
  } catch (err) {
    // Refusals time lifts (busy: another learner; unsafe: quorum or etcd's 5 s health rule) are waited
    // out, as is a store that does not answer now.
    if (isAgentError(err) && err.retryable) return `${step.kind}: ${err.message}`;
    throw err;
  }
}
