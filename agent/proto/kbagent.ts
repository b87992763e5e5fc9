/**
 * Wire shapes of the kbagent-compatible route `POST /v1.0/action` (CONTRACT §5):
 * the request, the two answer shapes, kbagent's error types, and the one table
 * that maps the agent's outcomes and error codes onto them. Pure.
 */
import { z } from 'zod';
import type { ErrorCode } from './errors';

/** The actions the route performs; any other name answers `notDefined`. */
export const KBAGENT_ACTIONS = ['memberJoin', 'memberLeave', 'roleProbe', 'switchover'] as const;
/** One of the actions the route performs. */
export type KbAgentAction = (typeof KBAGENT_ACTIONS)[number];

/** The `KB_*` parameters KubeBlocks passes to each action. */
export const KB_PARAMETERS = Object.freeze({
  joinName: 'KB_JOIN_MEMBER_POD_NAME',
  joinFqdn: 'KB_JOIN_MEMBER_POD_FQDN',
  leaveName: 'KB_LEAVE_MEMBER_POD_NAME',
  leaveFqdn: 'KB_LEAVE_MEMBER_POD_FQDN',
  switchoverCandidate: 'KB_SWITCHOVER_CANDIDATE_NAME',
});

/**
 * kbagent's error types (KubeBlocks pkg/kbagent/proto/errors.go); the route
 * answers the subset the contract's table names.
 */
export type KbAgentErrorType =
  | 'notDefined'
  | 'badRequest'
  | 'inProgress'
  | 'busy'
  | 'preconditionFailed'
  | 'timedOut'
  | 'failed'
  | 'internalError';

/**
 * The request body. `arguments`, `retryPolicy` and `rerun` are accepted and
 * ignored (CONTRACT §5); so is `nonBlocking`, which kbagent's own ActionRequest
 * carries (pkg/kbagent/proto/proto.go), so a KubeBlocks controller that sets it
 * is not refused. Any other field is a `badRequest`.
 */
export const kbAgentRequestSchema = z
  .object({
    action: z.string().min(1, 'action is required').max(128),
    parameters: z.record(z.string(), z.string()).optional(),
    timeoutSeconds: z.number().int().min(1).max(60).optional(),
    arguments: z.unknown().optional(),
    retryPolicy: z.unknown().optional(),
    rerun: z.unknown().optional(),
    nonBlocking: z.unknown().optional(),
  })
  .strict();

/** A validated request body. */
export type KbAgentRequest = z.infer<typeof kbAgentRequestSchema>;

/** A success answer: the output, base64-encoded as kbagent's Go `[]byte` is on the wire. */
export interface KbAgentSuccess {
  output: string;
}

/** A failure answer. */
export interface KbAgentFailure {
  error: KbAgentErrorType;
  message: string;
}

/** Either answer; always sent with HTTP 200. */
export type KbAgentResponse = KbAgentSuccess | KbAgentFailure;

/** The contract's mapping of the agent's error codes to kbagent's error types (CONTRACT §5). */
const ERROR_TYPES: Readonly<Record<ErrorCode, KbAgentErrorType>> = Object.freeze({
  busy: 'busy',
  unsafe: 'preconditionFailed',
  'bad-request': 'badRequest',
  timeout: 'timedOut',
  conflict: 'failed',
  unavailable: 'failed',
  'not-found': 'failed',
  internal: 'internalError',
  // Not produced by the services; listed so that every code has an answer.
  unauthorized: 'failed',
  forbidden: 'failed',
  'method-not-allowed': 'badRequest',
  'payload-too-large': 'badRequest',
  'unsupported-media-type': 'badRequest',
});

/** kbagent's error type for one of the agent's error codes. */
export function kbAgentErrorType(code: ErrorCode): KbAgentErrorType {
  return ERROR_TYPES[code];
}

/** Encodes an output as kbagent does (base64 of the bytes). */
export function encodeOutput(output: string | object): string {
  const text = typeof output === 'string' ? output : JSON.stringify(output);
  return Buffer.from(text, 'utf8').toString('base64');
}

/** Formats zod issues as one line a person can act on, e.g. "parameters.X: Expected string". */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const where = issue.path.length === 0 ? 'body' : issue.path.join('.');
      if (issue.code === 'unrecognized_keys') return `unknown field ${issue.keys.join(', ')}`;
      return `${where}: ${issue.message}`;
    })
    .join('; ');
}
