/**
 * Composition root: from a Config, the etcd client, the services and the
 * app that routes to them. `main.ts` and the integration tests both build the
 * agent here, so tests run exactly what production runs.
 */
import type { RequestListener } from 'node:http';
import type { Config } from './config/config';
import type { Deadline } from './lib/deadline';
import { BackupSchedule } from './backup/schedule';
import { BackupService } from './backup/service';
import { EtcdCluster } from './etcd/cluster-client';
import { connectionOptions } from './etcd/connection-options';
import { HealthObserver } from './health/observer';
import { readStartNote } from './health/start-note';
import { DefragSchedule } from './maintenance/schedule';
import { MaintenanceService } from './maintenance/service';
import { QuorumGate } from './membership/quorum-gate';
import { MembershipService } from './membership/service';
import type { Logger } from './observability/logger';
import { createMetrics, Metrics } from './observability/metrics';
import type { MemberStatus, OperationRecord } from './proto/types';
import type { PrepareOptions } from './prepare/options';
import { RecoveryService } from './recovery/service';
import type * as ExpressApp from './server/express-app';
import { mutationAuthWarnings } from './server/auth';
import { fastRoutes } from './server/fast-routes';
import { listen, Listening, ListenOptions } from './server/listen';
import { SHUTDOWN_BUDGET_MS, SHUTDOWN_CLOSE_RESERVE_MS } from './config/timings';

/** A built agent: its parts (those the express app is built from), for tests to look into, and how to stop it. */
export interface Agent extends Pick<ExpressApp.ExpressAppDeps, 'config' | 'logger' | 'metrics'> {
  /** The etcd cluster client every part of the agent calls through. */
  cluster: EtcdCluster;
  /** The backup service (POST /v1/backups and the schedules). */
  backups: BackupService;
  /** Every route: the fast ones (fast-routes.ts), the rest through the express app, built on first use. */
  app: RequestListener;
  /** Releases what the services hold (locks, timers), closes etcd connections, and waits for the calls in flight to answer. */
  close(): Promise<void>;
}

/** Builds the agent's services and app; does no I/O until called over HTTP. */
export function createAgent(config: Config, deps: { logger: Logger; metrics?: Metrics; prepare?: PrepareOptions }): Agent {
  const metrics = deps.metrics ?? createMetrics();
  const { logger } = deps;
  // Status answers also feed the maintenance service's revision history (a compaction retention given as a duration).
  let sawStatus: (status: MemberStatus) => void = () => undefined;
  const cluster = new EtcdCluster(
    connectionOptions(config, logger),
    (kind, result) => metrics.membershipChanges.inc({ kind, result }),
    (result, status) => {
      metrics.statusRpcs.inc({ result });
      if (status !== undefined) sawStatus(status);
    },
  );
  // Said at start, though the express app that enforces them is built later (below).
  for (const warning of mutationAuthWarnings(config)) logger.warn(warning);
  const stoppers: Array<() => Promise<void> | void> = [];
  // Calls through a quorum answer `unavailable` at once when no quorum of voters answers; the gate's
  // first look is the shared health observation while it is fresh (built below).
  const built: { health?: HealthObserver } = {};
  const gate = new QuorumGate({ cluster, config, logger, observed: () => built.health?.quorumEvidence() });
  // Membership (docs/api.md §4); its auto-promotion loop asks the local etcd for its Status once a second.
  const membership = new MembershipService({ cluster, config, logger, metrics, gate });
  // close() stops the auto-promotion loop too.
  membership.startAutoPromotion();
  // Maintenance (POST /v1/maintenance/defragment, ETCD_AGENT_DEFRAG_SCHEDULE): runs under the same cluster lock.
  const maintenance = new MaintenanceService({ cluster, config, logger, metrics, lock: membership.lock });
  sawStatus = (status) => maintenance.sawStatus(status);
  const schedule =
    config.defragSchedule === undefined
      ? undefined
      : new DefragSchedule({ schedule: config.defragSchedule, service: maintenance, logger, metrics });
  schedule?.start();
  // Stopped before membership, whose close releases the locks a stopped run still holds. A firing in
  // flight ends only with its run: the timer is disarmed at once, the run stopped, then the firing awaited.
  stoppers.push(async () => {
    const disarmed = schedule?.stop();
    await maintenance.close();
    await disarmed;
  });
  // Backups (docs/operations/backups.md, ETCD_AGENT_BACKUP_*): under the same cluster lock, into the configured store.
  const backups = new BackupService({ cluster, config, logger, metrics, lock: membership.lock });
  const backupSchedule =
    config.backupSchedule === undefined && config.backupVerifySchedule === undefined
      ? undefined
      : new BackupSchedule({ backup: config.backupSchedule, verify: config.backupVerifySchedule, service: backups, logger, metrics });
  backupSchedule?.start();
  void backups.refresh();
  // As the defragmentation's: the run in flight (a scheduled one's firing waits for it) is aborted first.
  stoppers.push(async () => {
    const disarmed = backupSchedule?.stop();
    await backups.close();
    await disarmed;
  });
  stoppers.push(() => membership.close());
  // Health (docs/api.md §4): shared bounded-age observations, with the membership changes in flight and this agent's run.
  const operations = (d: Deadline): Promise<OperationRecord[]> => membership.operationRecords(d);
  // What the etcd container's start script said when it refused to start etcd (prepare/version-gate.ts).
  const noteFile = config.startNoteFile;
  const startNote = noteFile === undefined ? undefined : (): Promise<string | undefined> => readStartNote(noteFile);
  const observer = new HealthObserver({ cluster, config, logger, metrics, operations, startNote, maintenance: () => maintenance.view() });
  built.health = observer;
  stoppers.push(() => observer.close());
  // Recovery (docs/operations/quorum-loss-recovery.md): the plan, the act through this pod's start script
  // (when kube-inject gave the sidecar the data directory and the flags file), the rejoin watch.
  const recovery = new RecoveryService({ config, cluster, health: observer, membership, logger, prepare: deps.prepare });
  recovery.start();
  stoppers.unshift(() => recovery.close());
  // The v1 routes, the health routes with a query, GET /v1/role, GET /v1/available and kbagent's wire format
  // (docs/api.md §5): express,
  // loaded and built by the first request that needs it (express-module.ts says why).
  let slow: RequestListener | undefined;
  const app = fastRoutes({ observer, metrics, logger }, () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on first use, see above
    slow ??= (require('./server/express-app') as typeof ExpressApp).expressApp({
      config,
      logger,
      metrics,
      membership,
      maintenance,
      health: observer,
      recovery,
      backups,
    });
    return slow;
  });
  return {
    config,
    logger,
    metrics,
    cluster,
    backups,
    app,
    close: async () => {
      for (const stop of stoppers) await stop();
      cluster.close();
      await Promise.all([membership.settled(), cluster.settled()]);
    },
  };
}

/** How long a stop may take in all (timings.ts); re-exported for callers of `stop`. */
export { SHUTDOWN_BUDGET_MS };

/** A running agent: built, listening, and stoppable as SIGTERM would stop it. */
export interface RunningAgent extends Agent {
  listening: Listening;
  /** Stops accepting, lets in-flight calls finish, then closes everything, all within `budgetMs`. */
  stop(budgetMs?: number): Promise<void>;
}

/** Builds and starts the agent; HTTP serves before etcd is reached (docs/api.md §2). */
export async function startAgent(
  config: Config,
  deps: { logger: Logger; metrics?: Metrics; listen?: ListenOptions; prepare?: PrepareOptions },
): Promise<RunningAgent> {
  const agent = createAgent(config, deps);
  const listening = await listen(agent.app, config, { logger: deps.logger, ...deps.listen });
  return {
    ...agent,
    listening,
    stop: async (budgetMs = SHUTDOWN_BUDGET_MS) => {
      // One budget for the whole stop (docs/api.md §2: within 5 s): in-flight calls get all of it but
      // the last 1.5 s (SHUTDOWN_CLOSE_RESERVE_MS), which is for releasing locks and closing etcd connections.
      const end = Date.now() + budgetMs;
      await listening.close(Math.max(0, budgetMs - SHUTDOWN_CLOSE_RESERVE_MS));
      let timer: NodeJS.Timeout | undefined;
      const budgetLeft = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, end - Date.now()))));
      await Promise.race([agent.close(), budgetLeft]);
      clearTimeout(timer);
      agent.cluster.close();
    },
  };
}
