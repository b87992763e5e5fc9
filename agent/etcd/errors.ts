/**
 * gRPC and etcd failures → the contract's `AgentError`: the one error-mapping family of the etcd
 * calls. The tables it reads (etcd's message → refusal and code, etcd3's class → code) are in
 * error-tables.ts; permission refusals are said in permission-refusal.ts. Here: the mapping itself,
 * the typed reason a call was refused, and which failures are worth another attempt.
 */
import { isBrokenCircuitError } from 'cockatiel';
import type pRetry from 'p-retry';
import type { Deadline } from '../lib/deadline';
import { AgentError } from '../proto/errors';
import { classRule, isEtcd3, messageRule, type EtcdRefusal } from './error-tables';
import { etcd3For } from './etcd3-module';

export type { EtcdRefusal } from './error-tables';

/** The agent closed its etcd connections (it is stopping): retryable for the caller, never inside the agent. */
export function shuttingDownError(cause?: unknown): AgentError {
  const said = cause instanceof Error ? { etcd: firstLine(cause.message) } : {};
  return new AgentError('unavailable', 'the agent is shutting down', { cause, details: { ...said, shutdown: true } });
}

/** True for `shuttingDownError()`, or etcd3's own error for a call on a closed client. */
export function isShuttingDown(err: unknown): boolean {
  return isEtcd3(err, 'ClientClosedError') || (err instanceof AgentError && err.details?.shutdown === true);
}

/** Maps any thrown value to an AgentError; an unrecognised non-etcd failure is `internal`. */
export function toAgentError(err: unknown): AgentError {
  if (err instanceof AgentError) return err;
  if (isEtcd3(err, 'ClientClosedError')) return shuttingDownError(err);
  const message = err instanceof Error ? err.message : String(err);
  const rule = messageRule(message);
  if (rule !== undefined) {
    return new AgentError(rule.code, rule.say, { cause: err, details: { ...rule.details, etcd: firstLine(message) } });
  }
  const byClass = classRule(err);
  if (byClass !== undefined) {
    return new AgentError(byClass.code, byClass.say, { cause: err, details: { etcd: firstLine(message) } });
  }
  // etcd3's classes leave `name` as "Error"; only the constructor tells an EtcdError apart.
  if (
    err instanceof Error &&
    (etcd3For(err)?.isRecoverableError(err) === true || /^GRPC|^Etcd/.test(err.name) || /^(GRPC|Etcd)/.test(err.constructor.name))
  ) {
    return new AgentError('unavailable', `etcd failed: ${firstLine(message)}`, { cause: err });
  }
  return new AgentError('internal', 'internal error', { cause: err });
}

/**
 * Why etcd refused the call that threw `err` (etcd's error itself, or the AgentError it was mapped
 * to, whose cause it is); undefined for any other failure.
 */
export function etcdRefusal(err: unknown): EtcdRefusal | undefined {
  if (err instanceof AgentError) return err.cause === undefined ? undefined : etcdRefusal(err.cause);
  return err instanceof Error ? messageRule(err.message)?.refusal : undefined;
}

/**
 * A failed call (given `timeoutMs`) in one line, as health lists it per member: the mapped message,
 * with etcd's own words when they add to it; a deadline is said as such.
 */
export function failureLine(err: unknown, timeoutMs: number): string {
  const error = toAgentError(err);
  if (ranOutOfTime(err)) return `no answer within ${timeoutMs} ms`;
  const etcd = error.details?.etcd;
  return typeof etcd === 'string' && error.code === 'unavailable' && !error.message.includes(etcd)
    ? `${error.message} (${etcd})`
    : error.message;
}

/** True when the call ended at its deadline with no answer from etcd (not a refusal in etcd's words). */
export function ranOutOfTime(err: unknown): boolean {
  const raw = err instanceof AgentError ? err.cause : err;
  const message = raw instanceof Error ? raw.message : '';
  return isEtcd3(raw, 'GRPCDeadlineExceededError') && messageRule(message) === undefined;
}

/** Pacing of `retryTransient`: the pause between attempts, and the time that must be left for another. */
export interface RetryPacing {
  minTimeout: number;
  maxTimeout: number;
  reserveMs: number;
}

/** p-retry options, the one retry rule of the etcd calls: transient failures only, four more attempts at most, never past `deadline`. */
export function retryTransient(deadline: Deadline, pacing: RetryPacing): pRetry.Options {
  return {
    retries: 4,
    minTimeout: pacing.minTimeout,
    maxTimeout: pacing.maxTimeout,
    onFailedAttempt: (err) => {
      if (!isTransient(err) || deadline.remainingMs() < pacing.reserveMs) throw err;
    },
  };
}

/** True for failures worth another attempt inside the deadline (transient network or leader churn). */
export function isTransient(err: unknown): boolean {
  // Retrying on a closed client would only spin until the call's deadline.
  if (isShuttingDown(err)) return false;
  // A NOSPACE alarm stays until someone reclaims space: waiting inside the call only delays the answer.
  if (isNoSpace(err)) return false;
  if (err instanceof AgentError) return err.code === 'unavailable' && err.retryable && !isCredentialError(err.cause);
  if (!(err instanceof Error)) return false;
  if (isCredentialError(err)) return false;
  if (etcd3For(err)?.isRecoverableError(err) === true || isEtcd3(err, 'GRPCDeadlineExceededError') || isBrokenCircuitError(err))
    return true;
  const refusal = etcdRefusal(err);
  // A learner's refusal is worth another attempt on every version (another endpoint may serve the
  // call, the learner may be promoted), not only where its gRPC code is one etcd3 calls recoverable.
  return (
    refusal === 'leader-changed' ||
    refusal === 'no-leader' ||
    refusal === 'not-leader' ||
    refusal === 'request-timed-out' ||
    refusal === 'learner-rpc'
  );
}

/**
 * True when the member asked refused the call because it is a learner ("etcdserver: rpc not
 * supported for learner"), or for the agent's mapping of such a refusal: another endpoint can serve
 * the call. etcd 3.4 and 3.5 send it with gRPC code 14 (Unavailable), which etcd3 calls recoverable
 * and fails over from; 3.6 and 3.7 with code 9 (FailedPrecondition), which it does not, and which
 * etcd also sends for refusals every member would repeat ("too many learner members", "can only
 * promote a learner member"). So the words decide, with either code (a row for each in
 * test/unit/etcd-errors.test.ts).
 */
export function isLearnerRefusal(err: unknown): boolean {
  return etcdRefusal(err) === 'learner-rpc';
}

/** True when etcd refused a write because its NOSPACE alarm is raised ("mvcc: database space exceeded"). */
export function isNoSpace(err: unknown): boolean {
  if (err instanceof AgentError && err.details?.alarm === 'NOSPACE') return true;
  return etcdRefusal(err) === 'nospace';
}

/** True when etcd refused the agent's credentials or permissions: a retry would be refused the same way. */
function isCredentialError(err: unknown): boolean {
  const refusal = err instanceof Error ? messageRule(err.message)?.refusal : undefined;
  return (
    isEtcd3(err, 'EtcdAuthenticationFailedError') ||
    isEtcd3(err, 'GRPCUnauthenticatedError') ||
    isEtcd3(err, 'EtcdPermissionDeniedError') ||
    refusal === 'invalid-token' ||
    refusal === 'user-required'
  );
}

function firstLine(message: string): string {
  return message.split('\n')[0].slice(0, 300);
}
