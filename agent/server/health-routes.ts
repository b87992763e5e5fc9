/**
 * The health routes (docs/api.md §4 GET /v1/health, GET /v1/health/local) as express serves them: check
 * the query, ask the observer, answer (health-answer.ts writes the body). A plain GET without a query
 * never gets here: fast-routes.ts answers it with the same functions.
 */
import type { Request, Router } from 'express';
import { withExpected } from '../health/classify';
import type { HealthObserver } from '../health/observer';
import { isValidMemberName } from '../proto/names';
import { AgentError } from '../proto/errors';
import { expressModule } from './express-module';
import { clusterHealthText, localHealthText, writeHealth } from './health-answer';
import { requestId } from './middleware';

/** The router of `GET /v1/health` and `GET /v1/health/local`. */
export function healthRouter(observer: HealthObserver): Router {
  const router = expressModule().Router();

  router.get('/v1/health', async (req, res) => {
    const arrival = performance.now();
    const expected = parseHealthQuery(req.query);
    const answer = await observer.cluster(arrival);
    const health = expected === undefined ? answer.health : withExpected(answer.health, expected);
    writeHealth(res, clusterHealthText(answer, health, requestId(res)));
  });

  router.get('/v1/health/local', async (req, res) => {
    const arrival = performance.now();
    const voter = parseVoterQuery(req.query);
    const answer = await observer.local(arrival, { learnerReady: !voter });
    writeHealth(res, localHealthText(answer, requestId(res)));
  });

  return router;
}

/** `?voter=true` (a learner is not ready, in sync or not) or `false` (the default); anything else is a bad request. */
export function parseVoterQuery(query: Request['query']): boolean {
  const raw = query.voter;
  if (raw === undefined || raw === 'false') return false;
  if (raw === 'true') return true;
  throw new AgentError('bad-request', 'voter must be given once, as true or false', { details: { field: 'voter' } });
}

/**
 * `?expected=etcd-0,etcd-1,etcd-2` → the names (DNS-1123 subdomains, comma-separated, given once);
 * undefined without it. Other parameters never get here: `requestGuard` refuses them first.
 */
export function parseHealthQuery(query: Request['query']): string[] | undefined {
  const raw = query.expected;
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string') throw new AgentError('bad-request', 'expected must be given once, as a comma-separated list of names');
  const names = raw.split(',').map((s) => s.trim());
  const bad = names.find((name) => name === '' || !isValidMemberName(name));
  if (bad !== undefined) {
    throw new AgentError('bad-request', `expected: "${bad.slice(0, 64)}" is not a member name (a DNS-1123 subdomain)`, {
      details: { field: 'expected' },
    });
  }
  return [...new Set(names)];
}
