/**
 * The maintenance route (docs/operations/defragmentation.md): `POST /v1/maintenance/defragment` parses its body,
 * asks the maintenance service and answers 200 when the run has ended, 202 while it goes on (in this
 * agent, or in another one that holds the lock). Under NOSPACE, on an agent that is not the runner,
 * the service hands the call on and this route answers what the runner's agent answered, status and
 * body as they came. No decision is made here.
 */
import { Router } from 'express';
import { HANDED_ON_HEADER } from '../maintenance/hand-on-decision';
import type { MaintenanceService } from '../maintenance/service';
import { defragmentRequestSchema, parseRequest } from '../proto/requests';
import { requestId, sendJson } from './middleware';

/** The router of `POST /v1/maintenance/defragment`. */
export function maintenanceRouter(service: MaintenanceService): Router {
  const router = Router();

  router.post('/v1/maintenance/defragment', async (req, res) => {
    const request = parseRequest(defragmentRequestSchema, req.body);
    const answer = await service.call(request, {
      requestId: requestId(res),
      handedOnBy: req.get(HANDED_ON_HEADER),
      authorization: req.get('authorization'),
    });
    if (answer.kind === 'handed-on') {
      res.status(answer.status).type('application/json').send(answer.text);
      return;
    }
    sendJson(res, answer.result.complete ? 200 : 202, answer.result);
  });

  return router;
}
