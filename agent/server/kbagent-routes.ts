/**
 * `POST /v1.0/action`, KubeBlocks kbagent's wire format (docs/api.md §5). An
 * adapter only: `memberJoin`, `memberLeave` and `switchover` call the same
 * membership service as the v1 routes, and `roleProbe` reads the shared health
 * observation (health/role.ts). The body is read as kbagent's Go server reads it (any or no
 * Content-Type, unknown fields ignored, `timeoutSeconds` as kbagent resolves
 * it); every answer is HTTP 200, `{output}` (base64) or `{error, message}`.
 */
import { Router } from 'express';
import type { ErrorRequestHandler, Request, Response } from 'express';
import type { Config } from '../config/config';
import { peerUrlFromFqdn } from '../proto/urls';
import type { MembershipService } from '../membership/service';
import type { Logger } from '../observability/logger';
import { answerOf } from '../proto/completion';
import { AgentError } from '../proto/errors';
import {
  describeIssues,
  effectiveTimeout,
  encodeOutput,
  KB_PARAMETERS,
  KbAgentAction,
  KBAGENT_ACTIONS,
  kbAgentErrorType,
  KbAgentRequest,
  kbAgentRequestSchema,
  KbAgentResponse,
  unknownFields,
} from '../proto/kbagent';
import {
  JoinRequest,
  joinRequestSchema,
  LeaveRequest,
  leaveRequestSchema,
  parseRequest,
  TransferRequest,
  transferRequestSchema,
} from '../proto/requests';
import type { ActionResult } from '../proto/types';
import { answerError, fromBodyParserError, requestId } from './middleware';
import type { HealthObserver } from '../health/observer';
import { noRoleError } from '../health/role';

const PATH = '/v1.0/action';

/** The membership operations the route adapts: the same service behind the v1 routes. */
export type KbAgentMembership = Pick<MembershipService, 'join' | 'leave' | 'transfer'>;

/** What the route needs. */
export interface KbAgentDeps {
  config: Config;
  membership: KbAgentMembership;
  logger: Logger;
  /** This pod's role, from the shared health observation (health/role.ts): roleProbe makes no etcd call of its own. */
  observer: Pick<HealthObserver, 'role'>;
}

/** The router of `POST /v1.0/action`. */
export function kbAgentRouter(deps: KbAgentDeps): Router {
  const router = Router();
  router.post(PATH, async (req, res) => {
    let answer: KbAgentResponse;
    try {
      answer = await perform(deps, req.body, requestId(res));
    } catch (err) {
      answer = failure(err, deps.logger, req, res);
    }
    res.status(200).json(answer);
  });
  return router;
}

/**
 * Errors raised before the route runs (a body that is not JSON, too large, in a
 * charset other than UTF-8) answer on this path as kbagent would: HTTP 200 with
 * `{error: "badRequest"}`, since a kbagent caller reads the body, not the status.
 * Auth refusals (401, 403) and 404/405 keep the contract's envelope and status:
 * a caller without credentials, or one that GETs, is not speaking kbagent, and
 * a 200 would hide the refusal from it.
 */
export function kbAgentErrorHandler(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, next) => {
    if (req.method !== 'POST' || req.path !== PATH || res.headersSent) return next(err);
    const code = err instanceof AgentError ? err.code : undefined;
    if (code === 'unauthorized' || code === 'forbidden' || code === 'method-not-allowed' || code === 'not-found') {
      return next(err);
    }
    res.status(200).json(failure(fromBodyError(err) ?? err, logger, req, res));
  };
}

async function perform(deps: KbAgentDeps, body: unknown, id: string): Promise<KbAgentResponse> {
  const parsed = kbAgentRequestSchema.safeParse(body);
  if (!parsed.success) throw new AgentError('bad-request', describeIssues(parsed.error));
  // Read as kbagent's Go server reads it: unknown fields ignored, the deadline as kbagent resolves it.
  const ignored = unknownFields(body);
  if (ignored.length > 0) deps.logger.debug('kbagent request: unknown fields ignored', { requestId: id, fields: ignored.slice(0, 20) });
  const timeout = effectiveTimeout(parsed.data.timeoutSeconds, deps.config.timeoutSeconds);
  if (timeout.note !== undefined) deps.logger.info('kbagent request: timeoutSeconds adjusted', { requestId: id, note: timeout.note });
  const request: KbAgentRequest = { ...parsed.data, timeoutSeconds: timeout.seconds };
  if (!isKnownAction(request.action)) {
    return { error: 'notDefined', message: `action ${request.action} is not defined; this agent performs ${KBAGENT_ACTIONS.join(', ')}` };
  }
  const context = { requestId: id };
  switch (request.action) {
    case 'memberJoin': {
      // kbagent success means done (docs/api.md §5): short of a started voter, `inProgress`.
      const join = joinRequest(deps.config, request);
      const result = await deps.membership.join(join, context);
      const decided = answerOf(result, true, join.name);
      if (decided.kind === 'error') return { error: kbAgentErrorType(decided.error.code), message: decided.error.message };
      return success(result, id);
    }
    case 'memberLeave':
      return success(await deps.membership.leave(leaveRequest(deps.config, request), context), id);
    case 'switchover':
      return success(await deps.membership.transfer(transferRequest(request), context), id);
    case 'roleProbe': {
      // Answered within the observation's max age, whatever timeoutSeconds says (it is at least 1 s).
      const { reading, maxAgeMs } = await deps.observer.role(performance.now());
      if (reading.kind !== 'role') throw noRoleError(reading, maxAgeMs);
      return { output: encodeOutput(reading.role) };
    }
  }
}

function isKnownAction(action: string): action is KbAgentAction {
  return (KBAGENT_ACTIONS as readonly string[]).includes(action);
}

function success(result: ActionResult, id: string): KbAgentResponse {
  return { output: encodeOutput({ requestId: id, ...result }) };
}

/** Any failure → `{error, message}`; internal errors are logged with their stack. */
function failure(err: unknown, logger: Logger, req: Request, res: Response): KbAgentResponse {
  const error = answerError(err, logger, req, res);
  return { error: kbAgentErrorType(error.code), message: error.message };
}

/**
 * Body-parser failures: every typed one (raw-body's error types) is the caller's fault here, in
 * this route's own words; an untyped one (a corrupt compressed body) maps as on the v1 routes.
 */
function fromBodyError(err: unknown): AgentError | undefined {
  if (typeof err !== 'object' || err === null || !('type' in err)) return fromBodyParserError(err);
  const type = String((err as { type: unknown }).type);
  if (type === 'entity.parse.failed') return new AgentError('bad-request', 'the body is not valid JSON');
  if (type === 'entity.too.large') return new AgentError('bad-request', 'the body is larger than 64 KiB');
  return new AgentError('bad-request', `the body could not be read (${type})`);
}

function parameter(request: KbAgentRequest, name: string): string | undefined {
  const value = request.parameters?.[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

function required(request: KbAgentRequest, name: string): string {
  const value = parameter(request, name);
  if (value === undefined) throw new AgentError('bad-request', `parameters.${name} is required for ${request.action}`);
  return value;
}

/** The peer URL a kbagent call names: from the pod's FQDN when given (docs/api.md §5), else the template decides. */
function peerURLs(config: Config, request: KbAgentRequest, fqdnParameter: string): string[] | undefined {
  const fqdn = parameter(request, fqdnParameter);
  return fqdn === undefined ? undefined : [peerUrlFromFqdn(fqdn, config.peerUrlTemplate)];
}

function joinRequest(config: Config, request: KbAgentRequest): JoinRequest {
  const urls = peerURLs(config, request, KB_PARAMETERS.joinFqdn);
  return parseRequest(joinRequestSchema, {
    name: required(request, KB_PARAMETERS.joinName),
    ...(urls === undefined ? {} : { peerURLs: urls }),
    ...timeout(request),
  });
}

function leaveRequest(config: Config, request: KbAgentRequest): LeaveRequest {
  const urls = peerURLs(config, request, KB_PARAMETERS.leaveFqdn);
  return parseRequest(leaveRequestSchema, {
    name: required(request, KB_PARAMETERS.leaveName),
    ...(urls === undefined ? {} : { peerURLs: urls }),
    ...timeout(request),
  });
}

function transferRequest(request: KbAgentRequest): TransferRequest {
  const to = parameter(request, KB_PARAMETERS.switchoverCandidate);
  return parseRequest(transferRequestSchema, { ...(to === undefined ? {} : { to }), ...timeout(request) });
}

function timeout(request: KbAgentRequest): { timeoutSeconds?: number } {
  return request.timeoutSeconds === undefined || request.timeoutSeconds === null ? {} : { timeoutSeconds: request.timeoutSeconds };
}
