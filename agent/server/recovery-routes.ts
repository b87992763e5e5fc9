/**
 * The recovery routes (docs/operations/quorum-loss-recovery.md): `GET /v1/recovery` (the plan, read
 * only), `POST /v1/recovery` (the act, refused with its figures unless every gate holds) and
 * `GET /v1/recovery/local` (this agent's own member, read by the other agents' plans). Dispatch only.
 */
import { Router } from 'express';
import type { Config } from '../config/config';
import { Deadline } from '../lib/deadline';
import { parseRequest, recoveryRequestSchema } from '../proto/requests';
import type { RecoveryService } from '../recovery/service';
import { sendJson } from './middleware';

/** The router of the three recovery routes. */
export function recoveryRouter(recovery: RecoveryService, config: Pick<Config, 'timeoutSeconds'>): Router {
  const router = Router();

  router.get('/v1/recovery', async (_req, res) => {
    sendJson(res, 200, await recovery.plan());
  });

  router.get('/v1/recovery/local', async (_req, res) => {
    sendJson(res, 200, await recovery.local());
  });

  router.post('/v1/recovery', async (req, res) => {
    const { timeoutSeconds, ...request } = parseRequest(recoveryRequestSchema, req.body);
    const deadline = Deadline.in((timeoutSeconds ?? config.timeoutSeconds) * 1000);
    const answer = await recovery.recover({ from: request.from, clusterId: request.clusterId, force: request.force === true }, deadline);
    sendJson(res, answer.complete ? 200 : 202, answer);
  });

  return router;
}
