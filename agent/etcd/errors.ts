/**
 * gRPC and etcd failures → the contract's `AgentError`, by tables: etcd's own
 * message text first (it says why a change was refused), then the error class.
 */
import { isBrokenCircuitError } from 'cockatiel';
import type pRetry from 'p-retry';
import type { Deadline } from '../deadline';
import { AgentError, ErrorCode } from '../proto/errors';
import { etcd3For } from './etcd3-module';

interface MessageRule {
  text: string;
  code: ErrorCode;
  say: string;
  details?: Record<string, unknown>;
}

/**
 * etcd's refusals, matched on the text of `etcdserver:` errors. See etcd's
 * server/etcdserver/api/v3rpc/rpctypes/error.go for the strings.
 */
const MESSAGE_RULES: readonly MessageRule[] = [
  {
    text: 'database space exceeded',
    code: 'unavailable',
    say:
      'etcd has raised a NOSPACE alarm (mvcc: database space exceeded) and accepts no writes, so the agent cannot ' +
      'write its membership lock and no membership change can be made. Reclaim space first: compact the key history ' +
      '(etcdctl compact <revision>), defragment every member (etcdctl defrag), then disarm the alarm (etcdctl alarm disarm); ' +
      'or raise --quota-backend-bytes',
    details: { alarm: 'NOSPACE', remedy: ['etcdctl compact <current revision>', 'etcdctl defrag (every member)', 'etcdctl alarm disarm'] },
  },
  { text: 'unhealthy cluster', code: 'unsafe', say: 'etcd refused the change: the cluster is unhealthy' },
  {
    text: 'not enough started members',
    code: 'unsafe',
    say: 'etcd refused the change: not enough started members',
  },
  { text: 'too many learner members', code: 'busy', say: 'etcd allows one learner at a time and has one' },
  {
    text: 'can only promote a learner member which is in sync with leader',
    code: 'busy',
    say: 'the learner is not yet in sync with the leader',
  },
  { text: 'Peer URLs already exists', code: 'conflict', say: 'the peer URL belongs to another member' },
  { text: 'member ID already exist', code: 'conflict', say: 'the member id already exists' },
  { text: 'member not found', code: 'not-found', say: 'etcd has no such member' },
  { text: 'leader changed', code: 'unavailable', say: 'the etcd leader changed during the call' },
  { text: 'no leader', code: 'unavailable', say: 'etcd has no leader' },
  { text: 'not leader', code: 'unavailable', say: 'the etcd member asked is not the leader' },
  { text: 'request timed out', code: 'unavailable', say: 'etcd timed out the request' },
  { text: 'not capable', code: 'unavailable', say: 'etcd is not capable of this yet' },
  { text: 'rpc not supported for learner', code: 'unavailable', say: 'the member asked is a learner' },
  // TLS handshakes that fail on configuration, not on the network (grpc-js/OpenSSL wording).
  ...['alert bad certificate', 'alert certificate required', 'alert unknown ca'].map((text) => ({
    text,
    code: 'unavailable' as const,
    say: 'etcd refused the agent TLS client certificate (ETCD_AGENT_ETCD_CERT_FILE / _KEY_FILE missing, or not signed by a CA etcd trusts)',
  })),
  ...['unable to verify the first certificate', 'self signed certificate', 'self-signed certificate', 'unable to get local issuer certificate'].map(
    (text) => ({
      text,
      code: 'unavailable' as const,
      say: 'the agent does not trust the TLS certificate of etcd (ETCD_AGENT_ETCD_CA_FILE is not the CA that signed it)',
    }),
  ),
  { text: 'certificate has expired', code: 'unavailable', say: 'a TLS certificate between the agent and etcd has expired' },
  { text: "does not match certificate's altnames", code: 'unavailable', say: 'the TLS certificate of etcd does not name the endpoint host' },
  {
    text: 'wrong version number',
    code: 'unavailable',
    say: 'the etcd endpoint does not speak TLS (once ETCD_AGENT_ETCD_CA_FILE is set, every endpoint is reached over TLS)',
  },
];

interface ClassRule {
  is: (err: unknown) => boolean;
  code: ErrorCode;
  say: string;
}

/** etcd3's error classes are read only for an error that may be one of them (see etcd3-module.ts). */
const CLASS_RULES: readonly ClassRule[] = [
  {
    is: (e) => {
      const lib = etcd3For(e);
      return (
        lib !== undefined &&
        (e instanceof lib.EtcdAuthenticationFailedError || e instanceof lib.GRPCUnauthenticatedError || e instanceof lib.EtcdInvalidAuthTokenError)
      );
    },
    code: 'unavailable',
    say: 'etcd rejected the agent credentials (ETCD_AGENT_ETCD_USERNAME / _PASSWORD_FILE)',
  },
  {
    is: (e) => isEtcd3(e, 'EtcdPermissionDeniedError'),
    code: 'unavailable',
    say: 'etcd denied permission to the agent user',
  },
  { is: (e) => isEtcd3(e, 'GRPCDeadlineExceededError'), code: 'unavailable', say: 'etcd did not answer in time' },
  { is: (e) => isEtcd3(e, 'GRPCUnavailableError'), code: 'unavailable', say: 'etcd is unreachable' },
  { is: (e) => isBrokenCircuitError(e), code: 'unavailable', say: 'etcd is unreachable (recent calls failed)' },
];

type Etcd3ErrorClass =
  | 'ClientClosedError'
  | 'EtcdAuthenticationFailedError'
  | 'EtcdPermissionDeniedError'
  | 'GRPCDeadlineExceededError'
  | 'GRPCUnauthenticatedError'
  | 'GRPCUnavailableError';

/** `err instanceof` etcd3's class `name`, without loading etcd3 for an error it cannot have made. */
function isEtcd3(err: unknown, name: Etcd3ErrorClass): boolean {
  const lib = etcd3For(err);
  return lib !== undefined && err instanceof lib[name];
}

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
  const rule = MESSAGE_RULES.find((r) => message.includes(r.text));
  if (rule !== undefined) {
    return new AgentError(rule.code, rule.say, { cause: err, details: { ...rule.details, etcd: firstLine(message) } });
  }
  const classRule = CLASS_RULES.find((r) => r.is(err));
  if (classRule !== undefined) {
    return new AgentError(classRule.code, classRule.say, { cause: err, details: { etcd: firstLine(message) } });
  }
  // etcd3's classes leave `name` as "Error"; only the constructor tells an EtcdError apart.
  if (err instanceof Error && (etcd3For(err)?.isRecoverableError(err) === true || /^GRPC|^Etcd/.test(err.name) || /^(GRPC|Etcd)/.test(err.constructor.name))) {
    return new AgentError('unavailable', `etcd failed: ${firstLine(message)}`, { cause: err });
  }
  return new AgentError('internal', 'internal error', { cause: err });
}

/** True when etcd refused a promotion because the learner is not yet in sync (a "not yet", not an error). */
export function isLearnerNotReady(err: unknown): boolean {
  return err instanceof Error && err.message.includes('can only promote a learner member which is in sync with leader');
}

/** True when etcd refused a promotion because the member is not a learner (it is already a voter). */
export function isNotLearner(err: unknown): boolean {
  return err instanceof Error && /can only promote a learner member(?! which)/.test(err.message);
}

/** True when etcd reports that the member does not (or no longer) exist. */
export function isMemberNotFound(err: unknown): boolean {
  return err instanceof Error && err.message.includes('member not found');
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
  if (etcd3For(err)?.isRecoverableError(err) === true || isEtcd3(err, 'GRPCDeadlineExceededError') || isBrokenCircuitError(err)) return true;
  return /leader changed|no leader|not leader|request timed out/.test(err.message);
}

/** True when etcd refused a write because its NOSPACE alarm is raised ("mvcc: database space exceeded"). */
export function isNoSpace(err: unknown): boolean {
  if (err instanceof AgentError) return err.details?.alarm === 'NOSPACE' || isNoSpace(err.cause);
  return err instanceof Error && err.message.includes('database space exceeded');
}

function isCredentialError(err: unknown): boolean {
  return isEtcd3(err, 'EtcdAuthenticationFailedError') || isEtcd3(err, 'GRPCUnauthenticatedError') || isEtcd3(err, 'EtcdPermissionDeniedError');
}

function firstLine(message: string): string {
  return message.split('\n')[0].slice(0, 300);
}
