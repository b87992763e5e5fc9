/**
 * Cross-cutting HTTP middleware: request ids, one log line per request, the
 * JSON body rules (64 KiB, application/json, an object), and the one error
 * renderer that turns anything thrown into the contract's envelope.
 */
import { randomUUID } from 'node:crypto';
import type { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response } from 'express';
import { expressModule } from './express-module';
import { AgentError } from '../proto/errors';
import { ROUTES } from '../proto/routes';
import { routePath } from './request-guard';
import type { Logger } from '../observability/logger';
import { recordHttpRequest, type Metrics } from '../observability/metrics';
import { toAgentError } from '../etcd/errors';

const INCOMING_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The request id of this request (set by `requestContext`). */
export function requestId(res: Response): string {
  return String(res.locals.requestId ?? '');
}

/** Gives every request an id (a sane incoming X-Request-Id, else a new UUID) and logs it when answered. */
export function requestContext(logger: Logger, metrics: Metrics): RequestHandler {
  return (req, res, next) => {
    const incoming = req.get('x-request-id');
    const id = incoming !== undefined && INCOMING_ID.test(incoming) ? incoming : randomUUID();
    res.locals.requestId = id;
    res.setHeader('X-Request-Id', id);
    const started = performance.now();
    res.on('finish', () => {
      const route = knownRoute(req.path) ?? 'unmatched';
      const seconds = (performance.now() - started) / 1000;
      recordHttpRequest(metrics, { method: req.method, route, code: res.statusCode, seconds });
      // At info, the default level: the contract logs every answer's requestId. Checked first,
      // since winston formats a line (timestamp, redaction, JSON) before its level drops it.
      const level = res.statusCode >= 500 ? 'warn' : 'info';
      if (!logger.isLevelEnabled(level)) return;
      logger.log(level, 'request', {
        requestId: id,
        method: req.method,
        path: req.path.slice(0, 200),
        status: res.statusCode,
        durationMs: Math.round(seconds * 100_000) / 100,
        remote: req.socket.remoteAddress,
      });
    });
    next();
  };
}

/** The contract route a path is served by; express matches case-insensitively and with a trailing slash too. */
function knownRoute(path: string): string | undefined {
  const served = routePath(path);
  return ROUTES.find((r) => r.path === served)?.path;
}

/**
 * Routes whose body is JSON whatever its Content-Type, including none: kbagent's Go client
 * (pkg/kbagent/client/http_client.go) sends its JSON without one (docs/api.md §5).
 */
export const ANY_CONTENT_TYPE_PATHS: readonly string[] = ['/v1.0/action'];

/**
 * Parses JSON bodies of at most 64 KiB; a POST must be application/json (an empty body counts
 * as `{}`), except on `ANY_CONTENT_TYPE_PATHS`, where any body is read as JSON.
 */
export function jsonBody(): RequestHandler[] {
  const parse = expressModule().json({ limit: '64kb', strict: true, type: () => true });
  const contentType: RequestHandler = (req, _res, next) => {
    if (req.method !== 'POST') return next();
    const length = req.get('content-length');
    const hasBody = (length !== undefined && length !== '0') || req.get('transfer-encoding') !== undefined;
    if (!hasBody) {
      req.body = {};
      return next();
    }
    if (!req.is('application/json') && !ANY_CONTENT_TYPE_PATHS.includes(routePath(req.path))) {
      return next(new AgentError('unsupported-media-type', 'the body must be application/json'));
    }
    next();
  };
  const objectOnly: RequestHandler = (req, _res, next) => {
    if (req.method !== 'POST') return next();
    if (req.body === undefined) req.body = {};
    if (typeof req.body !== 'object' || req.body === null || Array.isArray(req.body)) {
      return next(new AgentError('bad-request', 'the body must be a JSON object'));
    }
    next();
  };
  return [contentType, (req, res, next) => (req.method === 'POST' ? parse(req, res, next) : next()), objectOnly];
}

/** Answers a success body with the request id first. */
export function sendJson(res: Response, status: number, body: object): void {
  res.status(status).json({ requestId: requestId(res), ...body });
}

/** 405 for a known path with another method, else 404, as the contract's envelope. */
export function notFound(): RequestHandler {
  return (req, _res, next: NextFunction) => {
    const allowed = ROUTES.filter((r) => r.path === req.path).map((r) => r.method);
    if (allowed.length > 0) {
      _res.setHeader('Allow', allowed.join(', '));
      return next(new AgentError('method-not-allowed', `${req.method} is not allowed on ${req.path}; use ${allowed.join(', ')}`));
    }
    next(new AgentError('not-found', `no route ${req.method} ${req.path.slice(0, 200)}`));
  };
}

/**
 * Body-parser failures → the contract's codes: by their `type` (raw-body's and body-parser's error
 * types), else, for a decoding failure the parser does not name (a corrupt gzip, deflate or brotli
 * body: a 4xx status, no type), by status, so it is `bad-request`, not `internal`. Undefined for
 * anything else, an AgentError included.
 */
export function fromBodyParserError(err: unknown): AgentError | undefined {
  if (err instanceof AgentError || typeof err !== 'object' || err === null) return undefined;
  const { status, type, expose, code } = err as { status?: unknown; type?: unknown; expose?: unknown; code?: unknown };
  if (type !== undefined) {
    switch (type) {
      case 'entity.too.large':
        return new AgentError('payload-too-large', 'the body is larger than 64 KiB');
      case 'entity.parse.failed':
        return new AgentError('bad-request', 'the body is not valid JSON');
      case 'encoding.unsupported':
      case 'charset.unsupported':
        return new AgentError('unsupported-media-type', 'the body must be UTF-8 JSON');
      case 'request.aborted':
      case 'request.size.invalid':
      case 'stream.encoding.set':
        return new AgentError('bad-request', 'the body could not be read');
      default:
        return undefined;
    }
  }
  if (expose !== true || typeof status !== 'number' || status < 400 || status > 499) return undefined;
  if (status === 413) return new AgentError('payload-too-large', 'the body is larger than 64 KiB');
  if (status === 415) return new AgentError('unsupported-media-type', 'the body must be JSON in UTF-8, plain or gzip/deflate/br encoded');
  return new AgentError('bad-request', `the body could not be decoded${typeof code === 'string' ? ` (${code})` : ''}`);
}

/** Anything a route threw, as the AgentError it answers; an internal one is logged with the stack of what was thrown. */
export function answerError(err: unknown, logger: Logger, req: Request, res: Response): AgentError {
  const error = fromBodyParserError(err) ?? toAgentError(err);
  if (error.code === 'internal') {
    logger.error('internal error', {
      requestId: requestId(res),
      path: req.path,
      error: err instanceof Error ? err.stack : String(err),
    });
  }
  return error;
}

/** The one error renderer: anything thrown becomes `{requestId, error: {code, message, retryable, details}}`. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const error = answerError(err, logger, req, res);
    if (res.headersSent) return;
    res.status(error.status).json({ requestId: requestId(res), error: error.toBody() });
  };
}
