/**
 * What an error of the AWS SDK (or of the socket under it) means for the S3 store, as the
 * StoreFailure an operator acts on, and its text without anything that could hold a credential.
 * Pure.
 *
 * Invariant: the text is built from the error's name, code, HTTP status and message only, never
 * from the fields the SDK copies out of the answer's body or the request (a SignatureDoesNotMatch
 * carries the access key id, the string it signed and the signature there).
 */
import type { StoreFailure } from './store';

/** Socket errors of a store that is not there, or went away mid-call. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'ECONNABORTED',
]);

/** The store's answers that say the credentials are wrong, expired or not allowed to do this. */
const CREDENTIAL_NAMES = new Set([
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'AccessDenied',
  'ExpiredToken',
  'InvalidToken',
  'TokenRefreshRequired',
  'Forbidden',
  // versitygw's answer (404) to an access key it does not know.
  'XAdminUserNotFound',
  // The SDK's own: no credentials in its default chain at all.
  'CredentialsProviderError',
]);

interface ErrorShape {
  name?: unknown;
  code?: unknown;
  message?: unknown;
  errors?: unknown;
  $metadata?: { httpStatusCode?: unknown };
}

function shape(err: unknown): ErrorShape {
  return typeof err === 'object' && err !== null ? (err as ErrorShape) : {};
}

/** The HTTP status of the store's answer, when the error is one. */
export function httpStatusOf(err: unknown): number | undefined {
  const status = shape(err).$metadata?.httpStatusCode;
  return typeof status === 'number' ? status : undefined;
}

/**
 * The failure an SDK error stands for; `aborted` says the call's own signal ended it (its deadline),
 * which makes any error it caused a timeout.
 */
export function s3Failure(err: unknown, aborted = false): StoreFailure {
  const { name, message } = shape(err);
  // The SDK's retry layer turns a socket error it does not take for an Error (one of another realm,
  // as under a test runner's sandbox) into "AWS SDK error wrapper for Error: connect ECONNREFUSED …":
  // the code survives only in the text.
  const code = shape(err).code ?? (typeof message === 'string' ? /\b(E[A-Z_]{3,})\b/.exec(message)?.[1] : undefined);
  if (aborted || name === 'AbortError') return 'timeout';
  if (typeof code === 'string' && UNREACHABLE_CODES.has(code)) return 'unreachable';
  if (name === 'TimeoutError' || code === 'ETIMEDOUT' || name === 'RequestTimeout') return 'timeout';
  if (typeof name === 'string' && CREDENTIAL_NAMES.has(name)) return 'credentials';
  if (name === 'NoSuchBucket') return 'no-bucket';
  if (name === 'NoSuchKey' || name === 'NotFound' || name === 'NoSuchUpload') return 'not-found';
  const status = httpStatusOf(err);
  if (status === 403) return 'credentials';
  if (status === 404) return 'not-found';
  return 'failed';
}

/** The error as one line: name, HTTP status and message (an AggregateError's inner messages when it has none). */
export function s3ErrorText(err: unknown): string {
  const { name, code, message, errors } = shape(err);
  let text = typeof message === 'string' ? message : err instanceof Error ? '' : String(err);
  if (text === '' && Array.isArray(errors)) {
    text = errors
      .map((e) => shape(e).message)
      .filter((m): m is string => typeof m === 'string' && m !== '')
      .join('; ');
  }
  const status = httpStatusOf(err);
  const label = [
    typeof name === 'string' && name !== 'Error' && !text.includes(name) ? name : '',
    typeof code === 'string' && !text.includes(code) ? code : '',
    status === undefined ? '' : `HTTP ${status}`,
  ]
    .filter((part) => part !== '')
    .join(', ');
  if (text === '') return label === '' ? 'an error without a message' : label;
  return label === '' ? text : `${label}: ${text}`;
}
