/**
 * `ETCD_AGENT_BACKUP_SCHEDULE` and `ETCD_AGENT_BACKUP_VERIFY_SCHEDULE`: at each time the cron
 * expression names (UTC), this agent asks the backup service for a backup of that slot (or a
 * verification of the newest backup) and waits for its end. Every sidecar may have the schedules: a
 * slot gives one backup, by the lock and the store (take.ts). Each firing ends in one log line; a
 * failure is counted by the service (`etcd_agent_backup_failures_total`).
 */
import type { CronSchedule } from '../lib/cron';
import { CronTimer } from '../lib/cron-timer';
import { toAgentError } from '../etcd/errors';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { failureReason, type BackupService } from './service';

/** The backup and verification schedules of one agent; `start` once, `stop` on shutdown. */
export class BackupSchedule {
  private readonly timers: CronTimer[] = [];

  constructor(
    private readonly deps: {
      backup?: CronSchedule;
      verify?: CronSchedule;
      service: BackupService;
      logger: Logger;
      metrics: Metrics;
      now?: () => number;
    },
  ) {
    const now = deps.now ?? Date.now;
    if (deps.backup !== undefined) this.timers.push(new CronTimer(deps.backup, (at) => this.backupAt(at), now));
    if (deps.verify !== undefined) this.timers.push(new CronTimer(deps.verify, (at) => this.verifyAt(at), now));
  }

  /** Starts the timers and shows the backup schedule's period (`etcd_agent_backup_schedule_interval_seconds`). */
  start(): void {
    const { backup, verify, metrics, logger } = this.deps;
    const period = backup === undefined ? undefined : this.timers[0].periodSeconds();
    if (period !== undefined) metrics.backup.scheduleInterval.set({ store: this.deps.service.describe() ?? '' }, period);
    for (const timer of this.timers) timer.start();
    logger.info('backup schedule on', {
      backup: backup?.source ?? 'none',
      verify: verify?.source ?? 'none',
      next: this.timers[0]?.next()?.toISOString() ?? 'never',
    });
  }

  /** Disarms the timers at once; resolves once a firing in flight has ended (its run is the service's to stop: `close`). */
  async stop(): Promise<void> {
    await Promise.all(this.timers.map((t) => t.stop()));
  }

  /** One scheduled backup, for the slot `at` (the timer's, and the tests'). */
  async backupAt(at: Date): Promise<void> {
    const requestId = `backup-schedule-${at.toISOString()}`;
    try {
      const result = await this.deps.service.backup({}, { requestId, slot: at }, true);
      if (result.outcome === 'in-progress') {
        this.deps.logger.info('scheduled backup skipped', {
          requestId,
          why: `agent ${result.runningElsewhere?.agent ?? '?'} is taking it`,
        });
      } else {
        this.deps.logger.info('scheduled backup done', { requestId, name: result.manifest?.name, verified: result.verification?.ok });
      }
    } catch (err) {
      this.deps.logger.warn('scheduled backup failed', { requestId, error: toAgentError(err).message });
    } finally {
      await this.deps.service.refresh();
    }
  }

  /** One scheduled verification of the newest backup. */
  async verifyAt(at: Date): Promise<void> {
    const requestId = `verify-schedule-${at.toISOString()}`;
    try {
      const manifest = await this.deps.service.verify({});
      this.deps.logger.info('scheduled verification done', { requestId, name: manifest.name, ok: manifest.verification?.ok });
    } catch (err) {
      this.deps.metrics.backup.failures.inc({ step: 'verify', reason: failureReason(err) });
      this.deps.logger.warn('scheduled verification failed', { requestId, error: toAgentError(err).message });
    }
  }
}
