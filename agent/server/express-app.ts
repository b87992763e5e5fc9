/**
 * The express app of every route (CONTRACT §4, §5): the request guard, the v1 membership routes, the
 * health routes and the kbagent route behind createApp's middleware. Built on the first request the
 * fast routes do not answer (agent.ts), so express is not loaded by a start.
 */
import type { RequestListener } from 'node:http';
import type { Config } from '../config';
import type { EtcdCluster } from '../etcd/cluster-client';
import type { HealthObserver } from '../health/observer';
import type { MembershipService } from '../membership/service';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { createApp } from './app';
import { healthRouter } from './health-routes';
import { kbAgentErrorHandler, kbAgentRouter } from './kbagent-routes';
import { requestGuard } from './request-guard';
import { v1Router } from './v1-routes';

/** What the routes call. */
export interface ExpressAppDeps {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  cluster: EtcdCluster;
  membership: MembershipService;
  health: HealthObserver;
}

/** Builds the app: methods, query strings and charsets are checked before any route sees them (request-guard.ts). */
export function expressApp(deps: ExpressAppDeps): RequestListener {
  const { config, logger, metrics, cluster, membership, health } = deps;
  return createApp({
    config,
    logger,
    metrics,
    routers: [requestGuard(), v1Router(membership), healthRouter(health), kbAgentRouter({ config, cluster, membership, logger })],
    errorHandlers: [kbAgentErrorHandler(logger)],
  });
}
