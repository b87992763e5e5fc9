/**
 * Composition root: from a Config, the etcd client, the services and the
 * app that routes to them. `main.ts` and the integration tests both build the
 * agent here, so tests run exactly what production runs.
 */
import type { Router } from 'express';
import type { Config } from './config';
import type { Deadline } from './deadline';
import { EtcdCluster } from './etcd/cluster-client';
import { HealthObserver } from './health/observer';
import { MembershipService } from './membership/service';
import type { Logger } from './observability/logger';
import { createMetrics, Metrics } from './observability/metrics';
import type { OperationRecord } from './proto/types';
import { createApp } from './server/app';
import { healthRouter } from './server/health-routes';
import { kbAgentErrorHandler, kbAgentRouter } from './server/kbagent-routes';
import { listen, Listening, ListenOptions } from './server/listen';
import { requestGuard } from './server/request-guard';
import { roleRouter } from './server/role-routes';
import { v1Router } from './server/v1-routes';
import { SHUTDOWN_BUDGET_MS, SHUTDOWN_CLOSE_RESERVE_MS } from './timings';

/** A built agent: its parts, for tests to look into, and how to stop it. */
export interface Agent {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  cluster: EtcdCluster;
  app: ReturnType<typeof createApp>;
  /** Releases what the services hold (locks, timers) and closes etcd connections. */
  close(): Promise<void>;
}

/** Builds the agent's services and app; does no I/O until called over HTTP. */
export function createAgent(config: Config, deps: { logger: Logger; metrics?: Metrics }): Agent {
  const metrics = deps.metrics ?? createMetrics();
  const { logger } = deps;
  const cluster = new EtcdCluster(
    {
      endpoints: config.endpoints,
      keyPrefix: config.keyPrefix,
      caFile: config.etcdCaFile,
      certFile: config.etcdCertFile,
      keyFile: config.etcdKeyFile,
      username: config.etcdUsername,
      passwordFile: config.etcdPasswordFile,
      // The CA, certificate and key are re-read when their files change (etcd/credentials.ts).
      logger,
      peerURLs: config.localPeerUrl === undefined ? [] : [config.localPeerUrl],
    },
    (kind, result) => metrics.membershipChanges.inc({ kind, result }),
    (result) => metrics.statusRpcs.inc({ result }),
  );
  // Methods, query strings and charsets are checked before any route sees them (CONTRACT §4).
  const routers: Router[] = [requestGuard()];
  const stoppers: Array<() => Promise<void> | void> = [];
  // Membership (CONTRACT §4); its auto-promotion loop asks the local etcd for its Status once a second.
  const membership = new MembershipService({ cluster, config, logger, metrics });
  routers.push(v1Router(membership));
  // close() stops the auto-promotion loop too.
  membership.startAutoPromotion();
  stoppers.push(() => membership.close());
  // Health (CONTRACT §4): shared bounded-age observations, with the membership changes in flight.
  const operations = (d: Deadline): Promise<OperationRecord[]> => membership.listOperations(d);
  const health = new HealthObserver({ cluster, config, logger, metrics, operations });
  routers.push(healthRouter(health));
  stoppers.push(() => health.close());
  // kbagent's wire format (CONTRACT §5): an adapter over the same membership service.
  // roleProbe names the leader by the same rule as /v1/health, from the same shared observation.
  const leader = async (): Promise<{ known: boolean; id?: string }> => {
    const answer = await health.cluster();
    return answer.health.status === 'unknown' ? { known: false } : { known: true, id: answer.health.leader?.id };
  };
  routers.push(kbAgentRouter({ config, cluster, membership, logger, leader }));
  // This pod's role as plain text, for roleProbe as a KubeBlocks HTTP action.
  routers.push(roleRouter({ config, cluster, leader }));
  const app = createApp({ config, logger, metrics, routers, errorHandlers: [kbAgentErrorHandler(logger)] });
  return {
    config,
    logger,
    metrics,
    cluster,
    app,
    close: async () => {
      for (const stop of stoppers) await stop();
      cluster.close();
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

/** Builds and starts the agent; HTTP serves before etcd is reached (CONTRACT §2). */
export async function startAgent(
  config: Config,
  deps: { logger: Logger; metrics?: Metrics; listen?: ListenOptions },
): Promise<RunningAgent> {
  const agent = createAgent(config, deps);
  const listening = await listen(agent.app, config, { logger: deps.logger, ...deps.listen });
  return {
    ...agent,
    listening,
    stop: async (budgetMs = SHUTDOWN_BUDGET_MS) => {
      // One budget for the whole stop (CONTRACT §2: within 5 s): in-flight calls get all of it but
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
