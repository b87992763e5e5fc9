/**
 * The health routes (CONTRACT §4 GET /v1/health, GET /v1/health/local): check the query, ask the
 * observer, answer. 200 for `healthy`/`degraded` (and a ready local member), else 503 with the same
 * body plus the contract's `error` envelope, so a client that only reads errors sees why.
 */
import { Router, type Request, type Response } from 'express';
import type { ClusterHealth } from '../health/classify';
import { withExpected } from '../health/classify';
import type { HealthObserver } from '../health/observer';
import { isValidMemberName } from '../proto/names';
import { AgentError } from '../proto/errors';
import { sendJson } from './middleware';

/** The router of `GET /v1/health` and `GET /v1/health/local`. */
export function healthRouter(observer: HealthObserver): Router {
  const router = Router();

  router.get('/v1/health', async (req, res) => {
    const arrival = performance.now();
    const expected = parseHealthQuery(req.query);
    const answer = await observer.cluster(arrival);
    const health = expected === undefined ? answer.health : withExpected(answer.health, expected);
    const ok = health.status === 'healthy' || health.status === 'degraded';
    noStore(res);
    sendJson(res, ok ? 200 : 503, {
      status: health.status,
      observedAt: answer.observedAt,
      ageMs: answer.ageMs,
      ...bodyOf(health),
      ...(ok ? {} : { error: unavailable(health.errors[0] ?? `the cluster is ${health.status}`, { status: health.status }) }),
    });
  });

  router.get('/v1/health/local', async (_req, res) => {
    const arrival = performance.now();
    const answer = await observer.local(arrival);
    const { ready, member } = answer.local;
    noStore(res);
    sendJson(res, ready ? 200 : 503, {
      ...member,
      observedAt: answer.observedAt,
      ageMs: answer.ageMs,
      ...(ready ? {} : { error: unavailable(member.errors.at(-1) ?? 'the local member is not ready', { member: member.name }) }),
    });
  });

  return router;
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

/** The health body in the contract's field order (after status, observedAt and ageMs). */
function bodyOf(health: ClusterHealth): Omit<ClusterHealth, 'status'> {
  return {
    quorum: health.quorum,
    leader: health.leader,
    members: health.members,
    alarms: health.alarms,
    errors: health.errors,
    ...(health.expected === undefined ? {} : { expected: health.expected }),
    ...(health.operations === undefined ? {} : { operations: health.operations }),
  };
}

function unavailable(message: string, details: Record<string, unknown>): ReturnType<AgentError['toBody']> {
  return new AgentError('unavailable', message, { details }).toBody();
}

function noStore(res: Response): void {
  // A health answer is true only now; no cache may repeat it.
  res.setHeader('Cache-Control', 'no-store');
}
