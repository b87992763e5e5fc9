/**
 * The one error type of the agent and the contract's table of codes (docs/api.md §4 "Errors").
 * Everything that fails ends as an `AgentError`; one middleware renders it.
 */

/** Error codes exactly as the contract lists them. */
export type ErrorCode =
  | 'bad-request'
  | 'unauthorized'
  | 'forbidden'
  | 'not-found'
  | 'method-not-allowed'
  | 'conflict'
  | 'unsafe'
  | 'busy'
  | 'in-progress'
  | 'payload-too-large'
  | 'unsupported-media-type'
  | 'unavailable'
  | 'timeout'
  | 'internal';

interface CodeSpec {
  status: number;
  retryable: boolean;
}

/** HTTP status and retryability of every code, from the contract's table. */
export const ERROR_CODES: Readonly<Record<ErrorCode, CodeSpec>> = Object.freeze({
  'bad-request': { status: 400, retryable: false },
  unauthorized: { status: 401, retryable: false },
  forbidden: { status: 403, retryable: false },
  'not-found': { status: 404, retryable: false },
  'method-not-allowed': { status: 405, retryable: false },
  conflict: { status: 409, retryable: false },
  unsafe: { status: 409, retryable: true },
  busy: { status: 409, retryable: true },
  // Only with `requireComplete`: the change is under way but not at its end state yet.
  'in-progress': { status: 409, retryable: true },
  'payload-too-large': { status: 413, retryable: false },
  'unsupported-media-type': { status: 415, retryable: false },
  unavailable: { status: 503, retryable: true },
  timeout: { status: 504, retryable: true },
  internal: { status: 500, retryable: false },
});

/** Options of an AgentError beyond its code and message. */
export interface AgentErrorOptions {
  retryable?: boolean;
  details?: Record<string, unknown>;
  cause?: unknown;
}

/** A failure with a contract error code, an HTTP status and a message a person can act on. */
export class AgentError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly retryable: boolean;
  readonly details?: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, options: AgentErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AgentError';
    this.code = code;
    this.status = ERROR_CODES[code].status;
    this.retryable = options.retryable ?? ERROR_CODES[code].retryable;
    this.details = options.details;
  }

  /** The contract's JSON envelope, without the request id. */
  toBody(): { code: ErrorCode; message: string; retryable: boolean; details?: Record<string, unknown> } {
    return {
      code: this.code,
      message: this.message,
      retryable: this.retryable,
      ...(this.details === undefined ? {} : { details: this.details }),
    };
  }
}

/** True when `value` is an AgentError with the given code (or any code when none is given). */
export function isAgentError(value: unknown, code?: ErrorCode): value is AgentError {
  return value instanceof AgentError && (code === undefined || value.code === code);
}
