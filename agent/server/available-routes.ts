/**
 * `GET /v1/available`: whether this pod serves its cluster, for KubeBlocks' availableProbe as an HTTP
 * action (a 2xx is a succeeded probe, its body the probe's output). 200 `text/plain`
 * `available: etcd-0 is a healthy voter; 3 of 3 voters healthy, 2 required` while the cluster has a
 * quorum and this pod's member is one of its healthy voters; else the contract's `unavailable`
 * envelope (503) saying why. The verdict is health/available.ts's, over the shared observation.
 */
import { Router } from 'express';
import { availabilityOf } from '../health/available';
import type { HealthObserver } from '../health/observer';
import { AgentError } from '../proto/errors';

/** The path of the availability route. */
export const AVAILABLE_PATH = '/v1/available';

/** The router of `GET /v1/available`. */
export function availableRouter(observer: HealthObserver): Router {
  const router = Router();
  router.get(AVAILABLE_PATH, async (_req, res) => {
    const arrival = performance.now();
    const [cluster, local] = await Promise.all([observer.cluster(arrival), observer.local(arrival)]);
    const verdict = availabilityOf(cluster.health, local.local);
    if (!verdict.available) throw new AgentError('unavailable', verdict.reason);
    res.status(200).type('text/plain').setHeader('Cache-Control', 'no-store');
    res.send(verdict.text);
  });
  return router;
}
