/**
 * The backup metrics. The `last_success` and `last_verification` gauges describe the store, not this
 * agent: they are read from the newest manifests (backup/service.ts `showStore`), so every agent with
 * the store configured exports the same values, a restarted agent shows them again, and rules
 * aggregate them with `max by`. Each carries the store as its `store` label (`s3://bucket/prefix/`, `directory /backups`;
 * never a credential), so that they are absent until the store has been read once: an unlabelled
 * gauge would show 0, a time that never was.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

/** The backup metrics of one registry. */
export interface BackupMetrics {
  lastSuccessTime: Gauge<'store'>;
  lastSuccessSize: Gauge<'store'>;
  lastSuccessDuration: Gauge<'store'>;
  lastVerificationTime: Gauge<'store'>;
  lastVerificationSize: Gauge<'store'>;
  lastVerificationDuration: Gauge<'store'>;
  scheduleInterval: Gauge<'store'>;
  backups: Counter<'outcome'>;
  failures: Counter<'step' | 'reason'>;
  verifications: Counter<'result'>;
}

/** Registers the backup metrics on `registry`. */
export function createBackupMetrics(registry: Registry): BackupMetrics {
  const registers = [registry];
  const gauge = (name: string, help: string): Gauge<'store'> => new Gauge({ name, help, labelNames: ['store'] as const, registers });
  const metrics: BackupMetrics = {
    lastSuccessTime: gauge(
      'etcd_agent_backup_last_success_timestamp_seconds',
      'When the newest whole backup in the store was finished (Unix seconds).',
    ),
    lastSuccessSize: gauge('etcd_agent_backup_last_success_size_bytes', 'The size of the newest whole backup in the store.'),
    lastSuccessDuration: gauge(
      'etcd_agent_backup_last_success_duration_seconds',
      'How long the newest whole backup in the store took to take.',
    ),
    lastVerificationTime: gauge(
      'etcd_agent_backup_last_verification_timestamp_seconds',
      'When the newest backup whose verification passed (read back, hashes checked, restored and opened) was verified (Unix seconds).',
    ),
    lastVerificationSize: gauge('etcd_agent_backup_last_verification_size_bytes', 'The size of the newest verified backup.'),
    lastVerificationDuration: gauge(
      'etcd_agent_backup_last_verification_duration_seconds',
      'How long the verification of the newest verified backup took.',
    ),
    scheduleInterval: gauge(
      'etcd_agent_backup_schedule_interval_seconds',
      "The backup schedule's period (ETCD_AGENT_BACKUP_SCHEDULE); absent without one.",
    ),
    backups: new Counter({
      name: 'etcd_agent_backups_total',
      help: 'Backup calls of this agent (POST /v1/backups, the CLI, the schedule), by outcome (created, in-progress, slot-taken, failed).',
      labelNames: ['outcome'] as const,
      registers,
    }),
    failures: new Counter({
      name: 'etcd_agent_backup_failures_total',
      help: 'Failed backups and verifications, by step (lock, snapshot, upload, manifest, retention, verify) and reason (the store failure or the error code).',
      labelNames: ['step', 'reason'] as const,
      registers,
    }),
    verifications: new Counter({
      name: 'etcd_agent_backup_verifications_total',
      help: 'Verifications this agent ran to their verdict, by result (ok, failed).',
      labelNames: ['result'] as const,
      registers,
    }),
  };
  // Both results from the start: a first failure must be an increase from 0, which `increase()` sees.
  for (const result of ['ok', 'failed']) metrics.verifications.inc({ result }, 0);
  return metrics;
}
