/**
 * The express app of every route (CONTRACT §4, §5): the request guard, the v1 membership routes, the
 * health routes, the kbagent route, GET /v1/role and GET /v1/available behind createApp's middleware.
 * Built on the first request the fast routes do not answer (agent.ts), so express is not loaded by a start.
 */
import type { RequestListener } from 'node:http';
import type { Config } from '../config';
import type { EtcdCluster } from '../etcd/cluster-client';
import type { HealthObserver } from '../health/observer';
import type { MembershipService } from '../membership/service';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { createApp } from './app';
import { availableRouter } from './available-routes';
import { healthRouter } from './health-routes';
import { kbAgentErrorHandler, kbAgentRouter } from './kbagent-routes';
import type { RecoveryService } from '../recovery/service';
import { recoveryRouter } from './recovery-routes';
import { requestGuard } from './request-guard';
import { roleRouter } from './role-routes';
import { v1Router } from './v1-routes';

/** What the routes call. */
export interface ExpressAppDeps {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  cluster: EtcdCluster;
  membership: MembershipService;
  health: HealthObserver;
  recovery: RecoveryService;
}

/** Builds the app: methods, query strings and charsets are checked before any route sees them (request-guard.ts). */
export function expressApp(deps: ExpressAppDeps): RequestListener {
  const { config, logger, metrics, cluster, membership, health, recovery } = deps;
  // roleProbe (kbagent's and GET /v1/role) names the leader by the same rule as /v1/health, from the
  // same shared observation.
  const leader = async (): Promise<{ known: boolean; id?: string }> => {
    const answer = await health.cluster();
    return answer.health.status === 'unknown' ? { known: false } : { known: true, id: answer.health.leader?.id };
  };
  return createApp({
    config,
    logger,
    metrics,
    routers: [
      requestGuard(),
      v1Router(membership),
      healthRouter(health),
      // When the quorum is lost for good: the plan, the act, and this agent's own member.
      recoveryRouter(recovery, config),
      // kbagent's wire format (CONTRACT §5): an adapter over the same membership service.
      kbAgentRouter({ config, cluster, membership, logger, leader }),
      // This pod's role as plain text, for roleProbe as a KubeBlocks HTTP action.
      roleRouter({ config, cluster, leader }),
      // Whether this pod serves a cluster with a quorum, for availableProbe as a KubeBlocks HTTP action.
      availableRouter(health),
    ],
    errorHandlers: [kbAgentErrorHandler(logger)],
  });
}
