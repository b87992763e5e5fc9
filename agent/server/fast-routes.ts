/**
 * The routes that probes, scrapers and health loads call — GET /livez, /readyz, /metrics, /v1/health
 * and /v1/health/local — answered without express: its router, query parser and response helpers
 * would cost more CPU than the answer itself, and loading it a large part of a start-up's.
 *
 * Invariant: only a GET whose target is exactly one of those paths (no query but the probe's
 * `/v1/health/local?voter=true`, no trailing slash, no other case) is answered here; anything else goes to the express app, which serves those routes
 * too. An answer here is the one express would give, byte for byte, with the same request id, log
 * line and metrics: the same `requestContext` and `errorHandler` run, and the bodies come from the
 * same functions (health-answer.ts).
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Request, Response } from 'express';
import type { HealthObserver } from '../health/observer';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { clusterHealthText, localHealthText, writeHealth, writeJsonText } from './health-answer';
import { errorHandler, requestContext, requestId } from './middleware';

/** What the fast routes answer from. */
export interface FastRouteDeps {
  observer: HealthObserver;
  metrics: Metrics;
  logger: Logger;
}

type Route = (res: ServerResponse, requestId: string, arrival: number) => void | Promise<void>;

const OK = JSON.stringify({ status: 'ok' });

/** A request listener answering the fast routes itself and handing every other request to `slow()`. */
export function fastRoutes(deps: FastRouteDeps, slow: () => RequestListener): RequestListener {
  const { observer, metrics, logger } = deps;
  const context = requestContext(logger, metrics);
  const failed = errorHandler(logger);
  const routes = new Map<string, Route>([
    ['/livez', (res) => writeJsonText(res, OK)],
    // Ready once the server and configuration are up, whatever etcd's state (docs/api.md §4).
    ['/readyz', (res) => writeJsonText(res, OK)],
    [
      '/metrics',
      async (res) => {
        const text = await metrics.registry.metrics();
        res.setHeader('Content-Type', metrics.registry.contentType);
        res.setHeader('Content-Length', Buffer.byteLength(text));
        res.end(text);
      },
    ],
    [
      '/v1/health',
      async (res, id, arrival) => {
        const answer = await observer.cluster(arrival);
        writeHealth(res, clusterHealthText(answer, answer.health, id));
      },
    ],
    ['/v1/health/local', async (res, id, arrival) => writeHealth(res, localHealthText(await observer.local(arrival), id))],
    // The etcd container's readiness probe where etcd has no /readyz that fails a learner (kube-inject).
    [
      '/v1/health/local?voter=true',
      async (res, id, arrival) => writeHealth(res, localHealthText(await observer.local(arrival, { learnerReady: false }), id)),
    ],
  ]);
  return (req, res) => {
    const route = req.method === 'GET' ? routes.get(req.url ?? '') : undefined;
    if (route === undefined) {
      slow()(req, res);
      return;
    }
    const arrival = performance.now();
    const [request, response] = asExpress(req, res);
    context(request, response, () => {
      const fail = (err: unknown): void => {
        failed(err, request, response, () => undefined);
      };
      try {
        const done = route(res, requestId(response), arrival);
        if (done !== undefined) done.catch(fail);
      } catch (err) {
        fail(err);
      }
    });
  };
}

/** The few members of express's request and response that requestContext and errorHandler use. */
function asExpress(req: IncomingMessage, res: ServerResponse): [Request, Response] {
  const request = Object.assign(req, {
    path: req.url ?? '/',
    get: (name: string) => req.headers[name.toLowerCase()],
  });
  const response = Object.assign(res, {
    locals: {},
    status: (code: number) => {
      res.statusCode = code;
      return response;
    },
    json: (body: unknown) => writeJsonText(res, JSON.stringify(body)),
  });
  return [request as unknown as Request, response as unknown as Response];
}
