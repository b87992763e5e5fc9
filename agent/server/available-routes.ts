/**
 * `GET /v1/available`: whether this pod serves its cluster, for KubeBlocks' availableProbe as an HTTP
 * action (a 2xx is a succeeded probe, its body the probe's output). 200 `text/plain`
 * `available: etcd-0 is a healthy voter; 3 of 3 voters healthy, 2 required` while the cluster has a
 * quorum and this pod's member is one of its healthy voters; else the contract's `unavailable`
 * envelope (503) saying why. The verdict is health/available.ts's, over the shared observation.
 * `?stampSeconds=N` (1–3600) adds the observation's time, floored to a multiple of N seconds.
 */
import { Router, type Request } from 'express';
import { availabilityOf, stampedText } from '../health/available';
import type { HealthObserver } from '../health/observer';
import { AgentError } from '../proto/errors';

/** The path of the availability route. */
export const AVAILABLE_PATH = '/v1/available';

/** The router of `GET /v1/available`. */
export function availableRouter(observer: HealthObserver): Router {
  const router = Router();
  router.get(AVAILABLE_PATH, async (req, res) => {
    const arrival = performance.now();
    // True only now, an `unavailable` envelope as much as a 200: no cache may repeat either.
    res.setHeader('Cache-Control', 'no-store');
    const stamp = parseStampQuery(req.query);
    const [cluster, local] = await Promise.all([observer.cluster(arrival), observer.local(arrival)]);
    const verdict = availabilityOf(cluster.health, local.local);
    if (!verdict.available) throw new AgentError('unavailable', verdict.reason);
    res.status(200).type('text/plain');
    res.send(stamp === undefined ? verdict.text : stampedText(verdict.text, cluster.observedAt, stamp));
  });
  return router;
}

/** The longest stamp period: an hour. */
const MAX_STAMP_SECONDS = 3600;

/** `?stampSeconds=N`, a whole number of seconds from 1 to an hour, given once; undefined without it. */
export function parseStampQuery(query: Request['query']): number | undefined {
  const raw = query.stampSeconds;
  if (raw === undefined) return undefined;
  const n = typeof raw === 'string' && /^[0-9]{1,4}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1 && n <= MAX_STAMP_SECONDS)) {
    throw new AgentError('bad-request', `stampSeconds must be given once, as a whole number of seconds from 1 to ${MAX_STAMP_SECONDS}`, {
      details: { field: 'stampSeconds' },
    });
  }
  return n;
}
