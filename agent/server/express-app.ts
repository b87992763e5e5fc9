/**
 * The express app of every route (docs/api.md §4, §5): the request guard, the v1 membership routes, the
 * health routes, the kbagent route, GET /v1/role and GET /v1/available behind createApp's middleware.
 * Built on the first request the fast routes do not answer (agent.ts), so express is not loaded by a start.
 */
import type { RequestListener } from 'node:http';
import type { Config } from '../config/config';
import type { BackupService } from '../backup/service';
import type { HealthObserver } from '../health/observer';
import type { MaintenanceService } from '../maintenance/service';
import type { MembershipService } from '../membership/service';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { createApp } from './app';
import { availableRouter } from './available-routes';
import { backupRouter } from './backup-routes';
import { healthRouter } from './health-routes';
import { kbAgentErrorHandler, kbAgentRouter } from './kbagent-routes';
import type { RecoveryService } from '../recovery/service';
import { maintenanceRouter } from './maintenance-routes';
import { recoveryRouter } from './recovery-routes';
import { requestGuard } from './request-guard';
import { roleRouter } from './role-routes';
import { v1Router } from './v1-routes';

/** What the routes call. */
export interface ExpressAppDeps {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  membership: MembershipService;
  maintenance: MaintenanceService;
  health: HealthObserver;
  recovery: RecoveryService;
  backups: BackupService;
}

/** Builds the app: methods, query strings and charsets are checked before any route sees them (request-guard.ts). */
export function expressApp(deps: ExpressAppDeps): RequestListener {
  const { config, logger, metrics, membership, maintenance, health, recovery, backups } = deps;
  return createApp({
    config,
    logger,
    metrics,
    routers: [
      requestGuard(),
      v1Router(membership),
      maintenanceRouter(maintenance),
      // Backups into the configured store: take, list, verify.
      backupRouter(backups),
      healthRouter(health),
      // When the quorum is lost for good: the plan, the act, and this agent's own member.
      recoveryRouter(recovery, config),
      // kbagent's wire format (docs/api.md §5): an adapter over the same membership service.
      // roleProbe (kbagent's and GET /v1/role) reads the shared health observation, as /v1/health/local does.
      kbAgentRouter({ config, membership, logger, observer: health }),
      // This pod's role as plain text, for roleProbe as a KubeBlocks HTTP action.
      roleRouter(health),
      // Whether this pod serves a cluster with a quorum, for availableProbe as a KubeBlocks HTTP action.
      availableRouter(health),
    ],
    errorHandlers: [kbAgentErrorHandler(logger)],
  });
}
