/**
 * `createApp` builds the Express app (no listening here): middleware, the
 * process routes, the routers of the services, then 404/405 and the one error
 * renderer.
 */
import express, { ErrorRequestHandler, Router } from 'express';
import type { Config } from '../config/config';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { requireMutationAuth } from './auth';
import { errorHandler, jsonBody, notFound, requestContext } from './middleware';

/** What the app needs; `routers` carry the service routes (v1, health, kbagent). */
export interface AppDeps {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  routers: Router[];
  /** Error renderers tried before the contract's envelope (the kbagent route answers in its own format). */
  errorHandlers?: ErrorRequestHandler[];
}

/** Builds the HTTP app; the caller decides where it listens. */
export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(requestContext(deps.logger, deps.metrics));
  app.use(requireMutationAuth(deps.config, deps.logger));
  app.use(...jsonBody());

  app.get('/livez', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // Ready once the server and configuration are up, whatever etcd's state (docs/api.md §4).
  app.get('/readyz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/metrics', async (_req, res) => {
    res.setHeader('Content-Type', deps.metrics.registry.contentType);
    res.send(await deps.metrics.registry.metrics());
  });
  for (const router of deps.routers) app.use(router);

  app.use(notFound());
  for (const handler of deps.errorHandlers ?? []) app.use(handler);
  app.use(errorHandler(deps.logger));
  return app;
}
