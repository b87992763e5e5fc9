/**
 * Takes one backup of the cluster, straight through:
 *   1. take the membership lock (one backup at a time in the cluster, and no membership change
 *      under it); another agent's backup holding it is "in progress elsewhere";
 *   2. for a scheduled slot, stop if a backup of this slot is already in the store (another agent
 *      had it and was quicker): one backup per slot, however many agents have the schedule;
 *   3. abort unfinished uploads of killed runs (nobody else uploads while the lock is held);
 *   4. pick the member: a healthy voter, a follower first (source-decision.ts);
 *   5. stream its Snapshot RPC through a sha256 into the store (never all in memory, never a file);
 *   6. write the manifest beside it: only now is it a backup.
 * A failure at any step throws an AgentError naming the step (`details.step`), and leaves at most a
 * snapshot object without a manifest, never listed, removed by retention later.
 */
import { createHash } from 'node:crypto';
import { Transform } from 'node:stream';
import type { EtcdCluster } from '../etcd/cluster-client';
import { toAgentError } from '../etcd/errors';
import type { HeldLock } from '../etcd/held-lock';
import type { MembershipLock } from '../etcd/lock';
import { probeMembers, reaskWithin, type ClusterProbe } from '../membership/probe';
import { crashPoint } from '../lib/crash-point';
import { Deadline } from '../lib/deadline';
import { watchIdle } from '../lib/idle-watch';
import type { Logger } from '../observability/logger';
import type { Manifest } from '../proto/backup';
import { AgentError, isAgentError } from '../proto/errors';
import type { OperationRecord } from '../proto/types';
import { manifestBytes, manifestKey, newBackupName, readBackups, snapshotKey } from './layout';
import { decideSource, type StatusAnswer } from './source-decision';
import type { BackupStore } from './store';

/** What a backup needs. */
export interface TakeDeps {
  cluster: EtcdCluster;
  lock: MembershipLock;
  store: BackupStore;
  logger: Logger;
  /** This agent's member name, written into the manifest. */
  agent: string;
  /** How long each member's Status call may take. */
  statusTimeoutMs: number;
  /** The longest the snapshot may send nothing while the store is ready for more (ETCD_AGENT_BACKUP_SNAPSHOT_IDLE_SECONDS). */
  snapshotIdleMs: number;
}

/** One backup's options. */
export interface TakeOptions {
  /**
   * For the lock and the member choice; the stream itself runs until it ends, `signal` aborts it, or
   * the member sends nothing for `snapshotIdleMs` while the store waits for it.
   */
  deadline: Deadline;
  signal: AbortSignal;
  /** The schedule's slot this run is for. */
  slot?: Date;
  requestId?: string;
}

/** Where the `backup-uploading` crash point is: past two 8 MiB parts of an S3 upload. */
const CRASH_AFTER_BYTES = 16 * 1024 * 1024;

/** The steps a failure is counted under (`etcd_agent_backup_failures_total{step}`). */
export type BackupStep = 'lock' | 'snapshot' | 'upload' | 'manifest' | 'retention' | 'verify';

/** How a backup call ended. */
export type TakeOutcome =
  | { kind: 'created'; manifest: Manifest; abortedUploads: string[] }
  | { kind: 'slot-taken'; manifest: Manifest }
  | { kind: 'elsewhere'; record: OperationRecord };

/** Takes one backup (see the module comment). */
export async function takeBackup(deps: TakeDeps, options: TakeOptions): Promise<TakeOutcome> {
  const held = await lock(deps, options.deadline);
  if (!(held instanceof Object && 'release' in held)) return held;
  try {
    const { store, logger } = deps;
    const existing = await atStep('upload', () => readBackups(store));
    const newest = existing.entries.at(-1);
    if (options.slot !== undefined && newest !== undefined && Date.parse(newest.manifest.startedAt) >= options.slot.getTime()) {
      return { kind: 'slot-taken', manifest: newest.manifest };
    }
    const abortedUploads = await atStep('upload', () => store.abortUnfinished('', new Date()));
    if (abortedUploads.length > 0)
      logger.info('aborted unfinished backup uploads', { uploads: abortedUploads, requestId: options.requestId });

    const source = await atStep('snapshot', () => chooseSource(deps, options.deadline));
    const startedAt = new Date();
    const name = newBackupName(startedAt);
    await held.setStep(`snapshot of ${source.member.name} into ${name}`, options.deadline.child());
    logger.info('backup started', {
      name,
      member: source.member.name,
      why: source.reason,
      store: store.description,
      requestId: options.requestId,
    });
    // The member's revision just before its backend is snapshotted: every write at or below it is in
    // the snapshot (etcd commits its batch before it snapshots the backend); the verification reads
    // the exact revision later.
    const before = await atStep('snapshot', () => deps.cluster.memberStatus(source.clientURL, deps.statusTimeoutMs));
    const snapshot = await atStep('snapshot', () => deps.cluster.snapshot(source.clientURL, options.signal));
    const hash = createHash('sha256');
    let streamed = 0;
    const tap = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        hash.update(chunk);
        // Tests kill the agent here, once an upload is under way, to prove a killed upload is never listed.
        if (streamed < CRASH_AFTER_BYTES && streamed + chunk.length >= CRASH_AFTER_BYTES) crashPoint('backup-uploading');
        streamed += chunk.length;
        done(null, chunk);
      },
    });
    snapshot.bytes.on('error', (err) => tap.destroy(err));
    // `pipe` only unpipes when the store drops `tap`: the snapshot must then be destroyed, which
    // cancels etcd's Snapshot call (snapshot-stream.ts); else etcd's sender stays blocked holding
    // its backend read transaction until the agent exits.
    tap.on('close', () => snapshot.bytes.destroy());
    snapshot.bytes.pipe(tap);
    // A frozen or cut-off member sends neither bytes nor an error, and the lock would be held for ever.
    watchIdle(snapshot.bytes, deps.snapshotIdleMs, (silentMs) =>
      snapshot.bytes.destroy(
        new AgentError(
          'timeout',
          `member ${source.member.name} (${source.clientURL}) sent no snapshot bytes for ${Math.round(silentMs / 1000)} s while the store was ready for more (ETCD_AGENT_BACKUP_SNAPSHOT_IDLE_SECONDS): it is frozen or cut off; the backup is abandoned`,
          { details: { step: 'snapshot', member: source.member.name } },
        ),
      ),
    );
    const { sizeBytes } = await atStep('upload', async () => {
      try {
        return await store.upload(snapshotKey(name), tap, options.signal);
      } catch (err) {
        // The stream's own failure (etcd went away mid-snapshot) is the snapshot's, not the store's.
        if (snapshot.bytes.errored !== null) throw Object.assign(toAgentError(snapshot.bytes.errored), { step: 'snapshot' });
        throw err;
      } finally {
        snapshot.bytes.destroy();
      }
    });
    await atStep('snapshot', () => snapshot.header);
    const finishedAt = new Date();
    const manifest: Manifest = {
      format: 1,
      name,
      clusterId: source.clusterId,
      revision: before.revision,
      etcdVersion: before.version,
      member: { id: source.member.id, name: source.member.name, clientURL: source.clientURL },
      members: source.members.map((m) => ({ name: m.name, peerURLs: m.peerURLs })),
      agent: deps.agent,
      sizeBytes,
      sha256: hash.digest('hex'),
      startedAt: startedAt.toISOString(),
      finishedAt: finishedAt.toISOString(),
      durationMs: finishedAt.getTime() - startedAt.getTime(),
    };
    await atStep('manifest', () => store.put(manifestKey(name), manifestBytes(manifest)));
    logger.info('backup written', {
      name,
      revision: manifest.revision,
      sizeBytes,
      durationMs: manifest.durationMs,
      requestId: options.requestId,
    });
    return { kind: 'created', manifest, abortedUploads };
  } finally {
    await held.release();
  }
}

/** The lock, or another agent's backup that holds it. */
async function lock(deps: TakeDeps, deadline: Deadline): Promise<HeldLock | TakeOutcome> {
  try {
    return await deps.lock.acquire({ action: 'backup', member: { name: '', peerURLs: [] } }, deadline.child());
  } catch (err) {
    const operation = isAgentError(err, 'busy') ? (err.details?.operation as OperationRecord | undefined) : undefined;
    if (operation?.action === 'backup') return { kind: 'elsewhere', record: operation };
    throw withStep('lock', err);
  }
}

/**
 * The member to snapshot, from the member list and every member's Status; `unsafe` when none may be.
 * Before a refusal, the members that said nothing are asked once more with twice the time: one
 * answer slowed by a busy node or a pause of this agent is not a cluster without a quorum.
 */
export async function chooseSource(
  deps: { cluster: Pick<EtcdCluster, 'listMembers' | 'memberStatus'>; statusTimeoutMs: number },
  deadline: Deadline,
) {
  const list = await deps.cluster.listMembers(deadline.child());
  const probe = await probeMembers(deps.cluster, list.members, deadline.budget(deps.statusTimeoutMs));
  let decision = decideSource(list.members, answersOf(probe));
  if (decision.kind === 'none') {
    decision = decideSource(list.members, answersOf(await reaskWithin(deps.cluster, probe, deps.statusTimeoutMs, deadline)));
  }
  if (decision.kind === 'none') {
    throw new AgentError(
      'unsafe',
      `no member to take a backup from: ${decision.reason} (${decision.members.map((m) => `${m.name}: ${m.why}`).join('; ')})`,
      {
        details: { reason: 'unhealthy', members: decision.members },
      },
    );
  }
  return { ...decision, clusterId: list.clusterId, members: list.members };
}

/** A probe's answers by member id, for decideSource: members without a client URL were not asked. */
function answersOf(probe: ClusterProbe): Map<string, StatusAnswer> {
  return new Map(
    probe.probes.flatMap((p): [string, StatusAnswer][] => {
      if (p.url === undefined) return [];
      return [[p.member.id, p.status === undefined ? { error: p.error ?? 'no answer' } : { status: p.status }]];
    }),
  );
}

/** Runs `fn`, naming `step` in what it throws. */
async function atStep<T>(step: BackupStep, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw withStep(step, err);
  }
}

/** The AgentError of `err`, with `details.step` (kept when `err` names one already). */
function withStep(step: BackupStep, err: unknown): AgentError {
  const agentError = toAgentError(err);
  const named = (err as { step?: BackupStep }).step ?? (agentError.details?.step as BackupStep | undefined) ?? step;
  return new AgentError(agentError.code, agentError.message, {
    retryable: agentError.retryable,
    details: { ...agentError.details, step: named },
    cause: err,
  });
}

/** The step an error of `takeBackup` or of a verification names. */
export function stepOf(err: unknown, fallback: BackupStep): BackupStep {
  return (toAgentError(err).details?.step as BackupStep | undefined) ?? fallback;
}
