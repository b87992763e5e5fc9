/**
 * The maintenance route (docs/operations/defragmentation.md): `POST /v1/maintenance/defragment` parses its body,
 * asks the maintenance service and answers 200 when the run has ended, 202 while it goes on (in this
 * agent, or in another one that holds the lock). No decision is made here.
 */
import { Router } from 'express';
import type { MaintenanceService } from '../maintenance/service';
import { defragmentRequestSchema, parseRequest } from '../proto/requests';
import { requestId, sendJson } from './middleware';

/** The router of `POST /v1/maintenance/defragment`. */
export function maintenanceRouter(service: MaintenanceService): Router {
  const router = Router();

  router.post('/v1/maintenance/defragment', async (req, res) => {
    const request = parseRequest(defragmentRequestSchema, req.body);
    const result = await service.defragment(request, { requestId: requestId(res) });
    sendJson(res, result.complete ? 200 : 202, result);
  });

  return router;
}
