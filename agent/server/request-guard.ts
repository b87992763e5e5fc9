/**
 * What every request must look like before a route sees it (docs/api.md §4
 * `bad-request`, 405, 415): only the documented query parameters, only the
 * route's methods, JSON in UTF-8.
 * The process probes (/livez, /readyz, /metrics) ignore their query, so a
 * probe or scraper that adds one is never failed.
 */
import type { Router } from 'express';
import { expressModule } from './express-module';
import { AgentError } from '../proto/errors';
import { ROUTES } from '../proto/routes';

/** The query parameters each route accepts; routes not listed accept none. */
export const QUERY_PARAMETERS: Readonly<Record<string, readonly string[]>> = {
  '/v1/health': ['expected'],
  '/v1/health/local': ['voter'],
  '/v1/available': ['stampSeconds'],
};

const LENIENT_QUERY = new Set(['/livez', '/readyz', '/metrics']);

/** The route a path reaches: Express matches case-insensitively and ignores one trailing slash. */
export function routePath(path: string): string {
  const lower = path.toLowerCase();
  return lower.length > 1 && lower.endsWith('/') ? lower.slice(0, -1) : lower;
}

/** The query parameter of `path` that the route does not accept, if any. */
export function unexpectedQueryParameter(rawPath: string, keys: readonly string[]): string | undefined {
  const path = routePath(rawPath);
  if (LENIENT_QUERY.has(path) || !ROUTES.some((r) => r.path === path)) return undefined;
  const allowed = QUERY_PARAMETERS[path] ?? [];
  return keys.find((k) => !allowed.includes(k));
}

/** The methods a known route answers (HEAD with GET), or undefined for an unknown path. */
export function allowedMethods(rawPath: string): string[] | undefined {
  const path = routePath(rawPath);
  const methods = ROUTES.filter((r) => r.path === path).map((r) => r.method);
  if (methods.length === 0) return undefined;
  return methods.includes('GET') ? [...methods, 'HEAD'] : methods;
}

/** True when a Content-Type names a charset other than UTF-8 (RFC 8259 §8.1: JSON between systems is UTF-8). */
export function hasForeignCharset(contentType: string | undefined): boolean {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1];
  return charset !== undefined && !/^utf-?8$/i.test(charset);
}

/** A router, mounted before the service routes, that refuses requests no route should see. */
export function requestGuard(): Router {
  const router = expressModule().Router();
  router.use((req, res, next) => {
    const methods = allowedMethods(req.path);
    // Refused here, or Express would answer OPTIONS itself with a plain-text 200.
    if (methods !== undefined && !methods.includes(req.method)) {
      res.setHeader('Allow', methods.filter((m) => m !== 'HEAD').join(', '));
      return next(
        new AgentError(
          'method-not-allowed',
          `${req.method} is not allowed on ${req.path.slice(0, 200)}; use ${methods.filter((m) => m !== 'HEAD').join(', ')}`,
        ),
      );
    }
    const unexpected = unexpectedQueryParameter(req.path, Object.keys(req.query as Record<string, unknown>));
    if (unexpected !== undefined) {
      const allowed = QUERY_PARAMETERS[routePath(req.path)] ?? [];
      const accepted = allowed.length === 0 ? 'it takes none' : `accepted: ${allowed.join(', ')}`;
      return next(
        new AgentError('bad-request', `unknown query parameter "${unexpected.slice(0, 64)}" on ${req.method} ${req.path} (${accepted})`, {
          details: { field: unexpected.slice(0, 64) },
        }),
      );
    }
    if (req.method === 'POST' && hasForeignCharset(req.get('content-type'))) {
      return next(new AgentError('unsupported-media-type', 'the body must be JSON in UTF-8'));
    }
    next();
  });
  return router;
}
