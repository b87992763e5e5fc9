/**
 * `GET /v1/role`: this pod's member's role as plain text, for KubeBlocks'
 * roleProbe as an HTTP action, which takes a 2xx body as the role and any other
 * status as a failed probe. The body is exactly `leader`, `follower` or
 * `learner` (no newline, no JSON); when the role cannot be known (this pod's
 * etcd does not answer, or is not in the member list) the answer is the
 * contract's error envelope with its non-2xx status.
 */
import { Router } from 'express';
import { Deadline } from '../deadline';
import { localRole, type RoleDeps } from '../health/role';
import { ROLE_DEADLINE_SECONDS } from '../timings';

/** The path of the role route. */
export const ROLE_PATH = '/v1/role';

/** The router of `GET /v1/role`. */
export function roleRouter(deps: RoleDeps): Router {
  const router = Router();
  router.get(ROLE_PATH, async (_req, res) => {
    const deadline = Deadline.in(Math.min(deps.config.timeoutSeconds, ROLE_DEADLINE_SECONDS) * 1000);
    const role = await localRole(deps, deadline);
    res.status(200).type('text/plain').setHeader('Cache-Control', 'no-store');
    res.send(role);
  });
  return router;
}
