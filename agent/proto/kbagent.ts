/**
 * Wire shapes of the kbagent-compatible route `POST /v1.0/action` (docs/api.md §5):
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
  'notDefined' | 'badRequest' | 'inProgress' | 'busy' | 'preconditionFailed' | 'timedOut' | 'failed' | 'internalError';

/** The fields kbagent's ActionRequest (pkg/kbagent/proto/proto.go) carries, and `nonBlocking` of its Action. */
export const KBAGENT_REQUEST_FIELDS = [
  'action',
  'parameters',
  'arguments',
  'timeoutSeconds',
  'retryPolicy',
  'rerun',
  'nonBlocking',
] as const;

/**
 * The request body, read as kbagent's Go server reads it (`json.Unmarshal` into
 * its ActionRequest): fields it does not know are ignored (the route logs them at
 * debug), `arguments`, `retryPolicy`, `rerun` and `nonBlocking` are accepted and
 * ignored, and `timeoutSeconds` may be any whole number (see `effectiveTimeout`).
 * A field of the wrong type is a `badRequest`, as Go's decoder refuses it too.
 */
export const kbAgentRequestSchema = z
  .object({
    action: z.string().min(1, 'action is required').max(128),
    parameters: z.record(z.string(), z.string()).nullable().optional(),
    timeoutSeconds: z.number().int('must be a whole number').nullable().optional(),
    arguments: z.unknown().optional(),
    retryPolicy: z.unknown().optional(),
    rerun: z.unknown().optional(),
    nonBlocking: z.unknown().optional(),
  })
  .strip();

/** The top-level fields of a body that the route does not know (logged, then ignored). */
export function unknownFields(body: unknown): string[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return [];
  return Object.keys(body).filter((k) => !(KBAGENT_REQUEST_FIELDS as readonly string[]).includes(k));
}

/** The deadline a kbagent call gets, and a note when the request's value was not taken as is. */
export interface EffectiveTimeout {
  seconds: number;
  note?: string;
}

/** The longest deadline a call may have (docs/api.md §4), as kbagent caps blocking actions. */
export const MAX_TIMEOUT_SECONDS = 60;

/**
 * kbagent's reading of `timeoutSeconds` (pkg/kbagent/service/action_utils.go): absent or 0 is
 * the default, above 60 is 60. A negative value means "no timeout" to kbagent; the agent has no
 * unbounded call, so it takes the default and says so.
 */
export function effectiveTimeout(requested: number | null | undefined, fallback: number): EffectiveTimeout {
  if (requested === undefined || requested === null || requested === 0) return { seconds: fallback };
  if (requested < 0) {
    return {
      seconds: fallback,
      note: `timeoutSeconds ${requested} is negative (kbagent: no timeout); the agent uses its default ${fallback} s`,
    };
  }
  if (requested > MAX_TIMEOUT_SECONDS) {
    return {
      seconds: MAX_TIMEOUT_SECONDS,
      note: `timeoutSeconds ${requested} is above ${MAX_TIMEOUT_SECONDS}; capped at ${MAX_TIMEOUT_SECONDS} s`,
    };
  }
  return { seconds: requested };
}

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

/** The contract's mapping of the agent's error codes to kbagent's error types (docs/api.md §5). */
const ERROR_TYPES: Readonly<Record<ErrorCode, KbAgentErrorType>> = Object.freeze({
  busy: 'busy',
  'in-progress': 'inProgress',
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
