/**
 * The backup routes (docs/api.md §11): `POST /v1/backups` takes one (200 when it is written, 202 while
 * it goes on, here or in the agent holding the lock), `GET /v1/backups` lists the store's backups with
 * their verification state, `POST /v1/backups/verify` verifies one. No decision is made here.
 */
import { Router } from 'express';
import type { BackupService } from '../backup/service';
import { backupRequestSchema, verifyRequestSchema } from '../proto/backup';
import { parseRequest } from '../proto/requests';
import { requestId, sendJson } from './middleware';

/** The router of the backup routes. */
export function backupRouter(service: BackupService): Router {
  const router = Router();

  router.post('/v1/backups', async (req, res) => {
    const request = parseRequest(backupRequestSchema, req.body ?? {});
    const result = await service.backup(request, { requestId: requestId(res) });
    sendJson(res, result.outcome === 'created' ? 200 : 202, result);
  });

  router.get('/v1/backups', async (_req, res) => {
    sendJson(res, 200, await service.list());
  });

  router.post('/v1/backups/verify', async (req, res) => {
    const request = parseRequest(verifyRequestSchema, req.body ?? {});
    sendJson(res, 200, await service.verify(request));
  });

  return router;
}
