/**
 * `GET /v1/role`: this pod's member's role as plain text, for KubeBlocks'
 * roleProbe as an HTTP action, which takes a 2xx body as the role and any other
 * status as a failed probe. The body is exactly `leader`, `follower` or
 * `learner` (no newline, no JSON), read from the shared health observation
 * (health/role.ts): no etcd call of its own while the observation is fresh.
 * When there is no role, the answer is the contract's error envelope with its
 * non-2xx status, `details.reading` saying why (`not-answering`, `not-listed`,
 * `not-observed`).
 */
import { Router } from 'express';
import type { HealthObserver } from '../health/observer';
import { noRoleError } from '../health/role';

/** The path of the role route. */
export const ROLE_PATH = '/v1/role';

/** The router of `GET /v1/role`. */
export function roleRouter(observer: Pick<HealthObserver, 'role'>): Router {
  const router = Router();
  router.get(ROLE_PATH, async (_req, res) => {
    // True only now, an error envelope as much as a role: no cache may repeat either.
    res.setHeader('Cache-Control', 'no-store');
    const { reading, maxAgeMs } = await observer.role(performance.now());
    if (reading.kind !== 'role') throw noRoleError(reading, maxAgeMs);
    res.status(200).type('text/plain');
    res.send(reading.role);
  });
  return router;
}
