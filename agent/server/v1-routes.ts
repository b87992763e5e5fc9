/**
 * The v1 membership routes (CONTRACT §4): parse the body, call the service,
 * answer. No decision is made here; errors go to the one error middleware.
 */
import { Router } from 'express';
import type { MembershipService } from '../membership/service';
import {
  joinRequestSchema,
  leaveRequestSchema,
  parseRequest,
  promoteRequestSchema,
  transferRequestSchema,
} from '../proto/requests';
import type { ActionResult } from '../proto/types';
import { requestId, sendJson } from './middleware';

/** 202 while the member is still on its way (`added`, `in-progress`), else 200. */
export function httpStatusOf(result: ActionResult): number {
  return result.outcome === 'added' || result.outcome === 'in-progress' ? 202 : 200;
}

/** The router of `POST /v1/members/{join,leave,promote}`, `POST /v1/leader/transfer`, `GET /v1/members`, `GET /v1/operations`. */
export function v1Router(service: MembershipService): Router {
  const router = Router();

  router.post('/v1/members/join', async (req, res) => {
    const result = await service.join(parseRequest(joinRequestSchema, req.body), { requestId: requestId(res) });
    sendJson(res, httpStatusOf(result), result);
  });

  router.post('/v1/members/leave', async (req, res) => {
    const result = await service.leave(parseRequest(leaveRequestSchema, req.body), { requestId: requestId(res) });
    sendJson(res, httpStatusOf(result), result);
  });

  router.post('/v1/members/promote', async (req, res) => {
    const result = await service.promote(parseRequest(promoteRequestSchema, req.body), { requestId: requestId(res) });
    sendJson(res, httpStatusOf(result), result);
  });

  router.post('/v1/leader/transfer', async (req, res) => {
    const result = await service.transfer(parseRequest(transferRequestSchema, req.body), { requestId: requestId(res) });
    sendJson(res, httpStatusOf(result), result);
  });

  router.get('/v1/members', async (_req, res) => {
    sendJson(res, 200, await service.listMembers());
  });

  router.get('/v1/operations', async (_req, res) => {
    sendJson(res, 200, { operations: await service.listOperations() });
  });

  return router;
}
