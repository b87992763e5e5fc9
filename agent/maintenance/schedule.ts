/**
 * `ETCD_AGENT_DEFRAG_SCHEDULE`: at each time the cron expression names (UTC), this agent asks the
 * maintenance service for a run with the settings' thresholds and waits for its end. Every sidecar
 * may have the schedule: the cluster lock lets one run at a time (the others find it running and
 * skip), and under NOSPACE only the agent the runner rule names runs. A run that does not
 * defragment says why in one log line and in `etcd_agent_defrag_schedule_skips_total{reason}`:
 *
 *   nothing-to-do      no member over the thresholds
 *   unhealthy          a voter silent, no leader, or one lagging (nothing touched)
 *   unsafe             the cluster would not keep a quorum without the member (a one- or two-member cluster)
 *   running-elsewhere  another agent's run holds the lock
 *   busy               a membership change holds the lock
 *   not-nospace-runner NOSPACE is raised and another agent is the one that runs then
 *   failed             anything else (etcd unreachable, a deadline), with its message
 */
import type { CronSchedule } from '../lib/cron';
import { CronTimer } from '../lib/cron-timer';
import { toAgentError } from '../etcd/errors';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import type { DefragmentResult } from '../proto/maintenance';
import type { MaintenanceService } from './service';

/** Why a scheduled run did not defragment (the `reason` label). */
export type SkipReason = 'nothing-to-do' | 'unhealthy' | 'unsafe' | 'running-elsewhere' | 'busy' | 'not-nospace-runner' | 'failed';

/** Why a scheduled run's answer (or failure) is a skip; undefined when it defragmented. Pure. */
export function skipReason(outcome: DefragmentResult | unknown): SkipReason | undefined {
  if (isResult(outcome)) {
    if (outcome.outcome === 'nothing-to-do') return 'nothing-to-do';
    if (outcome.outcome === 'in-progress') return 'running-elsewhere';
    return undefined;
  }
  const error = toAgentError(outcome);
  const reason = error.details?.reason;
  if (error.code === 'unsafe') return reason === 'unhealthy' ? 'unhealthy' : 'unsafe';
  if (error.code === 'busy') return reason === 'nospace-runner' ? 'not-nospace-runner' : 'busy';
  return 'failed';
}

function isResult(value: unknown): value is DefragmentResult {
  return typeof value === 'object' && value !== null && (value as { action?: unknown }).action === 'defragment';
}

/** The schedule's timer; `start` once, `stop` on shutdown. */
export class DefragSchedule {
  private readonly timer: CronTimer;

  constructor(
    private readonly deps: { schedule: CronSchedule; service: MaintenanceService; logger: Logger; metrics: Metrics; now?: () => number },
  ) {
    this.timer = new CronTimer(
      deps.schedule,
      (at) => this.fire(at),
      () => this.now(),
    );
  }

  /** Starts waiting for the first time the schedule names. */
  start(): void {
    this.timer.start();
    this.deps.logger.info('defragmentation schedule on', {
      schedule: this.deps.schedule.source,
      next: this.timer.next()?.toISOString() ?? 'never',
    });
  }

  /** Disarms the timer at once; resolves once a firing in flight has ended (its run is the service's to stop: `close`). */
  async stop(): Promise<void> {
    await this.timer.stop();
  }

  /** Runs once now, as the timer does, and resolves when the run has ended (for tests and the timer). */
  async fire(at = new Date(this.now())): Promise<void> {
    const { service, logger, metrics } = this.deps;
    const requestId = `schedule-${at.toISOString()}`;
    let outcome: DefragmentResult | unknown;
    try {
      outcome = await service.defragment({}, { requestId }, true);
    } catch (err) {
      outcome = err;
    }
    const reason = skipReason(outcome);
    if (reason === undefined) {
      const result = outcome as DefragmentResult;
      logger.info('scheduled defragmentation done', {
        requestId,
        members: result.members.map((m) => m.name),
        durationMs: result.durationMs,
      });
      return;
    }
    metrics.defragScheduleSkips.inc({ reason });
    const why = isResult(outcome)
      ? outcome.outcome === 'in-progress'
        ? `agent ${outcome.run.agent} is running one (${outcome.run.step})`
        : `no member is over the thresholds (${outcome.skipped.map((s) => `${s.name}: ${s.reason}`).join('; ')})`
      : toAgentError(outcome).message;
    logger.info('scheduled defragmentation skipped', { requestId, reason, why });
  }

  private now(): number {
    return (this.deps.now ?? Date.now)();
  }
}
