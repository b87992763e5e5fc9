/**
 * The v1 membership routes (docs/api.md §4): parse the body, call the service,
 * answer. No decision is made here (`answerOf` decides the status, and what
 * `requireComplete` turns into an error); errors go to the one error middleware.
 */
import { Router } from 'express';
import type { Response } from 'express';
import type { MembershipService } from '../membership/service';
import { answerOf, statusOf } from '../proto/completion';
import { joinRequestSchema, leaveRequestSchema, parseRequest, promoteRequestSchema, transferRequestSchema } from '../proto/requests';
import type { ActionResult } from '../proto/types';
import { requestId, sendJson } from './middleware';

/** 202 while the member is still on its way (`added`, `in-progress`), else 200. */
export const httpStatusOf: (result: ActionResult) => number = statusOf;

/** Answers `result`, or throws the `in-progress` error when the caller required the end state. */
function answer(res: Response, result: ActionResult, requireComplete: boolean | undefined, name?: string): void {
  const decided = answerOf(result, requireComplete === true, name);
  if (decided.kind === 'error') throw decided.error;
  sendJson(res, decided.status, result);
}

/** The router of `POST /v1/members/{join,leave,promote}`, `POST /v1/leader/transfer`, `GET /v1/members`, `GET /v1/operations`. */
export function v1Router(service: MembershipService): Router {
  const router = Router();

  router.post('/v1/members/join', async (req, res) => {
    const { requireComplete, ...request } = parseRequest(joinRequestSchema, req.body);
    answer(res, await service.join(request, { requestId: requestId(res) }), requireComplete, request.name);
  });

  router.post('/v1/members/leave', async (req, res) => {
    const { requireComplete, ...request } = parseRequest(leaveRequestSchema, req.body);
    answer(res, await service.leave(request, { requestId: requestId(res) }), requireComplete, request.name);
  });

  router.post('/v1/members/promote', async (req, res) => {
    const { requireComplete, ...request } = parseRequest(promoteRequestSchema, req.body);
    answer(res, await service.promote(request, { requestId: requestId(res) }), requireComplete, request.name);
  });

  router.post('/v1/leader/transfer', async (req, res) => {
    const { requireComplete, ...request } = parseRequest(transferRequestSchema, req.body);
    answer(res, await service.transfer(request, { requestId: requestId(res) }), requireComplete);
  });

  router.get('/v1/members', async (_req, res) => {
    sendJson(res, 200, await service.listMembers());
  });

  router.get('/v1/operations', async (_req, res) => {
    sendJson(res, 200, { operations: await service.listOperations() });
  });

  return router;
}
