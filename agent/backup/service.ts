/**
 * The backup service: the one door of POST /v1/backups, GET /v1/backups, POST /v1/backups/verify,
 * the CLI's `backup` and the schedules. One backup at a time in this agent (a call while one runs
 * joins it); the cluster lock makes it one at a time in the cluster (take.ts). One verification at
 * a time too, as each downloads and restores a whole snapshot into scratch space: a call for the
 * backup being verified joins that verification, one for another is answered `busy`, and a backup's
 * own verification waits for the one running. After a backup:
 * its verification, then retention (outside the cluster lock: stores list and read what another
 * agent's retention removes meanwhile as gone, never as a failure). Every answer and failure is counted
 * (observability/backup-metrics.ts), and after every run the store's newest manifests set the
 * `last_success` and `last_verification` gauges, so they say what the store holds.
 */
import type { Config } from '../config/config';
import type { EtcdCluster } from '../etcd/cluster-client';
import { shuttingDownError, toAgentError } from '../etcd/errors';
import type { MembershipLock } from '../etcd/lock';
import { Deadline, settledWithin } from '../lib/deadline';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import type { BackupEntry, BackupRequest, BackupResult, Manifest, VerifyRequest } from '../proto/backup';
import { AgentError } from '../proto/errors';
import { describeLocation, openStore } from './location';
import { manifestKey, readBackups, snapshotKey, type Backups } from './layout';
import { findRestoreTool, type RestoreTool } from './restore-tool';
import { decideRetention } from './retention-decision';
import { stepOf, takeBackup, type BackupStep } from './take';
import type { BackupStore } from './store';
import { couldNotRun, verifyBackup } from './verify';

/** What the service is built from. */
export interface BackupServiceDeps {
  cluster: EtcdCluster;
  lock: MembershipLock;
  config: Config;
  logger: Logger;
  metrics: Metrics;
}

/** Who asked. */
export interface BackupContext {
  requestId?: string;
  /** The schedule's slot (one backup per slot in the cluster). */
  slot?: Date;
}

/** A snapshot without a manifest younger than this may be a run writing its manifest now. */
const ORPHAN_GRACE_SECONDS = 3600;
/** How long `close` waits for a run to stop. */
const CLOSE_WAIT_MS = 2000;

/** Backups of the cluster into the configured store. */
export class BackupService {
  private storeOpened?: Promise<BackupStore>;
  private toolFound?: Promise<RestoreTool>;
  private current?: Promise<BackupResult>;
  /** The verification running now, and of which backup. */
  private verifying?: { name: string; result: Promise<Manifest> };
  private readonly controller = new AbortController();
  private closed = false;

  constructor(private readonly deps: BackupServiceDeps) {}

  /** The store, opened on first use; a `conflict` when no store is configured. */
  store(): Promise<BackupStore> {
    const location = this.deps.config.backupStore;
    if (location === undefined) {
      return Promise.reject(
        new AgentError('conflict', 'no backup store is configured: set ETCD_AGENT_BACKUP_STORE (docs/operations/backups.md)'),
      );
    }
    this.storeOpened ??= openStore(location, this.deps.config.backupStoreTimeoutSeconds);
    return this.storeOpened;
  }

  /**
   * Takes a backup (or joins the one in flight) and answers its result: `created` with its manifest
   * and verification, or `in-progress` when another agent's backup holds the lock, or when the
   * call's deadline came first (the run goes on; `untilDone` waits for its end instead).
   */
  async backup(req: BackupRequest, context: BackupContext = {}, untilDone = false): Promise<BackupResult> {
    const started = performance.now();
    if (this.closed) throw shuttingDownError();
    const run = (this.current ??= this.run(req, context).finally(() => (this.current = undefined)));
    if (untilDone) return run;
    const deadline = Deadline.in((req.timeoutSeconds ?? this.deps.config.timeoutSeconds) * 1000);
    let timer: NodeJS.Timeout | undefined;
    const timeUp = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), deadline.remainingMs())));
    try {
      const result = await Promise.race([run, timeUp]);
      return (
        result ?? {
          action: 'backup',
          outcome: 'in-progress',
          removed: [],
          abortedUploads: [],
          durationMs: Math.round(performance.now() - started),
        }
      );
    } finally {
      clearTimeout(timer);
    }
  }

  /** The store's backups, newest first, and what is there but is not a backup. */
  async list(): Promise<{ backups: BackupEntry[]; broken: { name: string; why: string }[] }> {
    const found = await readBackups(await this.store());
    this.showStore(found);
    return { backups: [...found.entries].reverse(), broken: found.broken };
  }

  /** Verifies the named backup, or the newest, and answers its manifest with the verification record. */
  async verify(req: VerifyRequest = {}): Promise<Manifest> {
    if (this.closed) throw shuttingDownError();
    const store = await this.store();
    const found = await readBackups(store);
    const entry = req.name === undefined ? found.entries.at(-1) : found.entries.find((e) => e.name === req.name);
    if (entry === undefined) {
      const broken = found.broken.find((b) => b.name === req.name);
      throw new AgentError(
        'not-found',
        req.name === undefined
          ? `${store.description} holds no backup`
          : `${store.description} holds no backup ${req.name}${broken ? ` whole: ${broken.why}` : ''}`,
      );
    }
    const manifest = await this.verifyOne(store, entry, false);
    this.showStore(await readBackups(store));
    return manifest;
  }

  /** Reads the store once to set the gauges (at start, and at each schedule slot); failures only logged. */
  async refresh(): Promise<void> {
    if (this.deps.config.backupStore === undefined || this.closed) return;
    try {
      this.showStore(await readBackups(await this.store()));
    } catch (err) {
      this.deps.logger.warn('could not read the backup store', { error: toAgentError(err).message });
    }
  }

  /** Stops a run in flight (its upload is aborted; no manifest is written) and closes the store. */
  async close(): Promise<void> {
    this.closed = true;
    this.controller.abort(shuttingDownError());
    if (this.current !== undefined) await settledWithin(this.current, CLOSE_WAIT_MS);
    (await this.storeOpened?.catch(() => undefined))?.close();
  }

  private async run(req: BackupRequest, context: BackupContext): Promise<BackupResult> {
    const started = performance.now();
    const { config, logger, metrics } = this.deps;
    // A run that fails before its snapshot begins still shows where it began.
    logger.info('backup asked', {
      requestId: context.requestId,
      ...(context.slot === undefined ? {} : { slot: context.slot.toISOString() }),
    });
    try {
      const store = await this.store();
      const outcome = await takeBackup(
        {
          ...this.deps,
          store,
          agent: config.memberName,
          statusTimeoutMs: config.statusTimeoutMs,
          snapshotIdleMs: config.backupSnapshotIdleSeconds * 1000,
        },
        {
          deadline: Deadline.in((req.timeoutSeconds ?? config.timeoutSeconds) * 1000),
          signal: this.controller.signal,
          ...context,
        },
      );
      const durationMs = (): number => Math.round(performance.now() - started);
      if (outcome.kind === 'elsewhere') {
        metrics.backup.backups.inc({ outcome: 'in-progress' });
        return {
          action: 'backup',
          outcome: 'in-progress',
          removed: [],
          abortedUploads: [],
          runningElsewhere: { agent: outcome.record.agent, startedAt: outcome.record.startedAt },
          durationMs: durationMs(),
        };
      }
      if (outcome.kind === 'slot-taken') {
        metrics.backup.backups.inc({ outcome: 'slot-taken' });
        return {
          action: 'backup',
          outcome: 'created',
          manifest: outcome.manifest,
          removed: [],
          abortedUploads: [],
          durationMs: durationMs(),
        };
      }
      metrics.backup.backups.inc({ outcome: 'created' });
      let manifest = outcome.manifest;
      let verificationNotRun: string | undefined;
      if (req.verify !== false) {
        try {
          manifest = await this.verifyOne(store, { name: manifest.name, state: 'unverified', manifest }, true);
        } catch (err) {
          this.failed('verify', err);
          verificationNotRun = toAgentError(err).message;
        }
      }
      const removed = await this.retain(store);
      this.showStore(await readBackups(store).catch(() => undefined));
      return {
        action: 'backup',
        outcome: 'created',
        manifest,
        ...(manifest.verification === undefined ? {} : { verification: manifest.verification }),
        ...(verificationNotRun === undefined ? {} : { verificationNotRun }),
        removed,
        abortedUploads: outcome.abortedUploads,
        durationMs: durationMs(),
      };
    } catch (err) {
      metrics.backup.backups.inc({ outcome: 'failed' });
      this.failed(stepOf(err, 'upload'), err);
      logger.warn('backup failed', { step: stepOf(err, 'upload'), error: toAgentError(err).message, requestId: context.requestId });
      throw err;
    }
  }

  /**
   * Verifies `entry` unless a verification runs: of the same backup, joins it; of another, waits for
   * it (`waitForOther`) or answers `busy`.
   */
  private async verifyOne(store: BackupStore, entry: BackupEntry, waitForOther: boolean): Promise<Manifest> {
    for (let running = this.verifying; running !== undefined; running = this.verifying) {
      if (running.name === entry.name) return running.result;
      if (!waitForOther) {
        throw new AgentError(
          'busy',
          `backup ${running.name} is being verified now, and one verification runs at a time (each reads back and restores a whole snapshot): call again once it ends`,
          { details: { verifying: running.name } },
        );
      }
      await running.result.catch(() => undefined);
    }
    const result: Promise<Manifest> = this.verifyEntry(store, entry).finally(() => {
      if (this.verifying?.result === result) this.verifying = undefined;
    });
    this.verifying = { name: entry.name, result };
    return result;
  }

  private async verifyEntry(store: BackupStore, entry: BackupEntry): Promise<Manifest> {
    this.toolFound ??= findRestoreTool(this.deps.config.etcdutl);
    const tool = await this.toolFound.catch((err: unknown) => {
      this.toolFound = undefined;
      throw couldNotRun(entry.name, (err as Error).message, err);
    });
    const manifest = await verifyBackup({ store, tool, logger: this.deps.logger }, entry, this.controller.signal);
    const v = manifest.verification;
    if (v?.ok === true) {
      this.deps.metrics.backup.verifications.inc({ result: 'ok' });
      this.deps.logger.info('backup verified', {
        name: entry.name,
        revision: v.revision,
        keys: v.keys,
        durationMs: v.durationMs,
        tool: v.tool,
      });
    } else if (v?.ok === false) {
      this.deps.metrics.backup.verifications.inc({ result: 'failed' });
      this.deps.metrics.backup.failures.inc({ step: 'verify', reason: v.check });
      this.deps.logger.error('backup failed its verification', { name: entry.name, check: v.check, error: v.error });
    }
    return manifest;
  }

  /** Retention after a backup; a failure is counted and logged, never the backup's failure. */
  private async retain(store: BackupStore): Promise<string[]> {
    const { config, logger } = this.deps;
    try {
      const found = await readBackups(store);
      const decision = decideRetention(
        found.entries.map((e) => ({ name: e.name, state: e.state, finishedAt: new Date(e.manifest.finishedAt) })),
        found.listing.orphans.map((o) => ({ key: o.key, modifiedAt: o.modifiedAt })),
        { keepLast: config.backupKeepLast, keepForSeconds: config.backupKeepForSeconds, orphanGraceSeconds: ORPHAN_GRACE_SECONDS },
        new Date(),
      );
      // The manifest first: without it the snapshot is an orphan, never a backup listed half removed.
      for (const name of decision.remove) await store.remove([manifestKey(name), snapshotKey(name)]);
      if (decision.removeOrphans.length > 0) await store.remove(decision.removeOrphans);
      if (decision.remove.length > 0 || decision.removeOrphans.length > 0)
        logger.info('backup retention removed', {
          backups: decision.remove,
          orphans: decision.removeOrphans,
          kept: decision.keptAsNewestVerified,
        });
      return decision.remove;
    } catch (err) {
      this.failed('retention', err);
      logger.warn('backup retention failed', { error: toAgentError(err).message });
      return [];
    }
  }

  private failed(step: BackupStep, err: unknown): void {
    const error = toAgentError(err);
    this.deps.metrics.backup.failures.inc({ step, reason: failureReason(error) });
    if (step === 'verify') this.deps.logger.warn('backup verification could not run', { error: error.message });
  }

  /** Sets the store gauges from a listing. */
  private showStore(found: Backups | undefined): void {
    if (found === undefined) return;
    const m = this.deps.metrics.backup;
    const store = { store: this.describe() ?? '' };
    const newest = found.entries.at(-1)?.manifest;
    if (newest !== undefined) {
      m.lastSuccessTime.set(store, Date.parse(newest.finishedAt) / 1000);
      m.lastSuccessSize.set(store, newest.sizeBytes);
      m.lastSuccessDuration.set(store, newest.durationMs / 1000);
    }
    const verified = [...found.entries].reverse().find((e) => e.manifest.verification?.ok === true)?.manifest;
    if (verified?.verification !== undefined) {
      m.lastVerificationTime.set(store, Date.parse(verified.verification.verifiedAt) / 1000);
      m.lastVerificationSize.set(store, verified.sizeBytes);
      m.lastVerificationDuration.set(store, verified.verification.durationMs / 1000);
    }
  }

  /** Where backups go, for the start-up log line. */
  describe(): string | undefined {
    const location = this.deps.config.backupStore;
    return location === undefined ? undefined : describeLocation(location);
  }
}

/**
 * The `reason` label of a failure (`etcd_agent_backup_failures_total`): the store's failure, a
 * verification that could not run (`could-not-run`), else the error code.
 */
export function failureReason(err: unknown): string {
  const details = toAgentError(err).details;
  return (details?.store as string | undefined) ?? (details?.verification as string | undefined) ?? toAgentError(err).code;
}
