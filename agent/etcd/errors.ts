/**
 * gRPC and etcd failures → the contract's `AgentError`, by tables: etcd's own
 * message text first (it says why a change was refused), then the error class.
 */
import { isBrokenCircuitError } from 'cockatiel';
import type pRetry from 'p-retry';
import type { Deadline } from '../lib/deadline';
import { AgentError, ErrorCode } from '../proto/errors';
import { etcd3For } from './etcd3-module';

/**
 * Why etcd refused a call, as a typed reason: the only form in which etcd's wording leaves
 * `agent/etcd/` (callers compare `etcdRefusal(err)`, never the text).
 */
export type EtcdRefusal =
  | 'nospace'
  | 'unhealthy-cluster'
  | 'not-enough-started'
  | 'too-many-learners'
  | 'learner-not-ready'
  | 'not-learner'
  | 'peer-url-exists'
  | 'member-id-exists'
  | 'member-not-found'
  | 'leader-changed'
  | 'no-leader'
  | 'not-leader'
  | 'request-timed-out'
  | 'not-capable'
  | 'learner-rpc'
  | 'invalid-token'
  | 'user-required'
  | 'compacted'
  | 'future-revision'
  | 'tls';

interface MessageRule {
  /** etcd's (or OpenSSL's) wording; a RegExp where a plain substring would also match a longer message. */
  text: string | RegExp;
  refusal: EtcdRefusal;
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
    refusal: 'nospace',
    code: 'unavailable',
    say:
      'etcd has raised a NOSPACE alarm (mvcc: database space exceeded) and accepts no writes, so the agent cannot ' +
      'write its membership lock and no membership change can be made. Reclaim space first: ' +
      'POST /v1/maintenance/defragment {"compact": {"retainRevisions": N}} (CLI: etcd-lifecycle-agent defragment ' +
      '--compact-retain N) compacts the key history, defragments every member one at a time (the leader last) and disarms ' +
      'the alarm once every database is under the quota; by hand: etcdctl compact <revision>, etcdctl defrag on every member, ' +
      'etcdctl alarm disarm; or raise --quota-backend-bytes',
    details: {
      alarm: 'NOSPACE',
      remedy: [
        'POST /v1/maintenance/defragment {"compact": {"retainRevisions": N}}',
        'by hand: etcdctl compact <current revision>; etcdctl defrag (every member, the leader last); etcdctl alarm disarm',
      ],
    },
  },
  { text: 'unhealthy cluster', refusal: 'unhealthy-cluster', code: 'unsafe', say: 'etcd refused the change: the cluster is unhealthy' },
  {
    text: 'not enough started members',
    refusal: 'not-enough-started',
    code: 'unsafe',
    say: 'etcd refused the change: not enough started members',
  },
  { text: 'too many learner members', refusal: 'too-many-learners', code: 'busy', say: 'etcd allows one learner at a time and has one' },
  {
    text: 'can only promote a learner member which is in sync with leader',
    refusal: 'learner-not-ready',
    code: 'busy',
    say: 'the learner is not yet in sync with the leader',
  },
  {
    // The same words without "which is in sync": the member is a voter already.
    text: /can only promote a learner member(?! which)/,
    refusal: 'not-learner',
    code: 'conflict',
    say: 'etcd refused the promotion: the member is not a learner (it is a voter already)',
  },
  { text: 'Peer URLs already exists', refusal: 'peer-url-exists', code: 'conflict', say: 'the peer URL belongs to another member' },
  { text: 'member ID already exist', refusal: 'member-id-exists', code: 'conflict', say: 'the member id already exists' },
  { text: 'member not found', refusal: 'member-not-found', code: 'not-found', say: 'etcd has no such member' },
  { text: 'leader changed', refusal: 'leader-changed', code: 'unavailable', say: 'the etcd leader changed during the call' },
  { text: 'no leader', refusal: 'no-leader', code: 'unavailable', say: 'etcd has no leader' },
  { text: 'not leader', refusal: 'not-leader', code: 'unavailable', say: 'the etcd member asked is not the leader' },
  { text: 'request timed out', refusal: 'request-timed-out', code: 'unavailable', say: 'etcd timed out the request' },
  { text: 'not capable', refusal: 'not-capable', code: 'unavailable', say: 'etcd is not capable of this yet' },
  {
    text: 'invalid auth token',
    refusal: 'invalid-token',
    code: 'unavailable',
    say: 'etcd rejected the agent credentials (ETCD_AGENT_ETCD_USERNAME / _PASSWORD_FILE)',
  },
  {
    // With auth on, etcd 3.5+ (and 3.4.42+) refuse MemberList, Status and the alarm list without a user.
    text: 'user name is empty',
    refusal: 'user-required',
    code: 'unavailable',
    say: 'etcd has authentication enabled and refused a call without a user: set ETCD_AGENT_ETCD_USERNAME and ETCD_AGENT_ETCD_PASSWORD_FILE',
  },
  // Sent with gRPC code 14 (Unavailable) by etcd 3.4 and 3.5, with 9 (FailedPrecondition) from 3.6;
  // the same words on every version (see `isLearnerRefusal`).
  { text: 'rpc not supported for learner', refusal: 'learner-rpc', code: 'unavailable', say: 'the member asked is a learner' },
  // A compaction at or below the revision already compacted: what it asked for is done.
  { text: 'required revision has been compacted', refusal: 'compacted', code: 'conflict', say: 'etcd has compacted that revision already' },
  { text: 'required revision is a future revision', refusal: 'future-revision', code: 'bad-request', say: 'the revision asked for is beyond the current one' },
  // TLS handshakes that fail on configuration, not on the network (grpc-js/OpenSSL wording).
  ...['alert bad certificate', 'alert certificate required', 'alert unknown ca'].map((text) => ({
    text,
    refusal: 'tls' as const,
    code: 'unavailable' as const,
    say: 'etcd refused the agent TLS client certificate (ETCD_AGENT_ETCD_CERT_FILE / _KEY_FILE missing, or not signed by a CA etcd trusts)',
  })),
  ...['unable to verify the first certificate', 'self signed certificate', 'self-signed certificate', 'unable to get local issuer certificate'].map(
    (text) => ({
      text,
      refusal: 'tls' as const,
      code: 'unavailable' as const,
      say: 'the agent does not trust the TLS certificate of etcd (ETCD_AGENT_ETCD_CA_FILE is not the CA that signed it)',
    }),
  ),
  { text: 'certificate has expired', refusal: 'tls', code: 'unavailable', say: 'a TLS certificate between the agent and etcd has expired' },
  { text: "does not match certificate's altnames", refusal: 'tls', code: 'unavailable', say: 'the TLS certificate of etcd does not name the endpoint host' },
  {
    text: 'wrong version number',
    refusal: 'tls',
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
    say: 'etcd denied permission to the agent user: its membership lock and operation records need readwrite on ETCD_AGENT_KEY_PREFIX, membership changes the root role',
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

/** The etcd RPCs of the agent whose permission etcd checks, each differently by version (README "etcd versions"). */
export type GuardedRpc = 'member-list' | 'barrier' | 'status' | 'alarm' | 'move-leader' | 'add' | 'remove' | 'promote';

/**
 * What etcd requires of the user for each RPC while its authentication is on: measured on 3.4.23,
 * 3.5.35, 3.6.16 and 3.7.3 (test/integration/etcd-tls-auth.test.ts), the other patch releases read
 * in etcd's source (the CVE-2026-33413 fix of 3.4.42, 3.5.28 and 3.6.9 closed MemberList, the alarm
 * list and Status to all but the root role; later patches opened them to any user again).
 */
export const PERMISSION_RULES: Readonly<Record<GuardedRpc, { rpc: string; rule: string; role?: 'prefix' }>> = {
  add: { rpc: 'MemberAdd', rule: 'membership changes need the root role on every etcd version' },
  remove: { rpc: 'MemberRemove', rule: 'membership changes need the root role on every etcd version' },
  promote: { rpc: 'MemberPromote', rule: 'membership changes need the root role on every etcd version' },
  'move-leader': { rpc: 'MoveLeader', rule: 'it needs the root role from etcd 3.5.28 and in 3.6 and 3.7 (3.4 and 3.5 up to 3.5.27 check no permission)' },
  status: { rpc: 'Status', rule: 'it needs the root role on etcd 3.4.42 and later 3.4, 3.5.28 to 3.5.31 and 3.6.0 to 3.6.11, any user from 3.5.32 and 3.6.12' },
  alarm: { rpc: 'the alarm list', rule: 'it needs the root role on etcd 3.4.42, 3.5.28 and 3.6.9, any user from 3.4.43, 3.5.29 and 3.6.10' },
  'member-list': { rpc: 'MemberList', rule: 'it needs the root role on etcd 3.4.42, 3.5.28 and 3.6.9, any user from 3.4.43, 3.5.29 and 3.6.10' },
  barrier: {
    rpc: 'the read that makes the member list linearizable on etcd 3.4',
    rule: 'it reads below ETCD_AGENT_KEY_PREFIX, as the membership lock does',
    role: 'prefix',
  },
};

/**
 * `err` as the AgentError the agent answers: when etcd denied `rpc` to the agent's user, one that
 * names the RPC, the user and the role etcd wants (not retryable: only an operator's grant changes
 * it); any other failure as `toAgentError` maps it.
 */
export function permissionRefusal(err: unknown, rpc: GuardedRpc, user: string | undefined): AgentError {
  // Already said, by the innermost call that knew which RPC it was.
  if (err instanceof AgentError && err.details?.rpc !== undefined) return err;
  const error = toAgentError(err);
  const raw = error.cause ?? err;
  if (!isEtcd3(raw, 'EtcdPermissionDeniedError')) return error;
  const { rpc: name, rule, role } = PERMISSION_RULES[rpc];
  const who = user === undefined ? 'the agent' : `the agent user "${user}"`;
  const grant =
    role === 'prefix'
      ? 'give its role readwrite on ETCD_AGENT_KEY_PREFIX: etcdctl role grant-permission <role> --prefix=true readwrite <prefix>'
      : user === undefined
        ? 'give the agent an etcd user with the root role'
        : `etcdctl user grant-role ${user} root`;
  return new AgentError('unavailable', `etcd denied permission for ${name} to ${who}: ${rule} (${grant})`, {
    cause: raw,
    retryable: false,
    details: { ...error.details, rpc: name, role: role === 'prefix' ? 'readwrite on ETCD_AGENT_KEY_PREFIX' : 'root' },
  });
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
  const rule = ruleFor(message);
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

function ruleFor(message: string): MessageRule | undefined {
  return MESSAGE_RULES.find((r) => (typeof r.text === 'string' ? message.includes(r.text) : r.text.test(message)));
}

/**
 * Why etcd refused the call that threw `err` (etcd's error itself, or the AgentError it was mapped
 * to, whose cause it is); undefined for any other failure.
 */
export function etcdRefusal(err: unknown): EtcdRefusal | undefined {
  if (err instanceof AgentError) return err.cause === undefined ? undefined : etcdRefusal(err.cause);
  return err instanceof Error ? ruleFor(err.message)?.refusal : undefined;
}

/**
 * A failed call (given `timeoutMs`) in one line, as health lists it per member: the mapped message,
 * with etcd's own words when they add to it; a deadline is said as such.
 */
export function failureLine(err: unknown, timeoutMs: number): string {
  const error = toAgentError(err);
  const raw = err instanceof AgentError ? err.cause : err;
  const message = raw instanceof Error ? raw.message : '';
  if (isEtcd3(raw, 'GRPCDeadlineExceededError') && ruleFor(message) === undefined) return `no answer within ${timeoutMs} ms`;
  const etcd = error.details?.etcd;
  return typeof etcd === 'string' && error.code === 'unavailable' && !error.message.includes(etcd) ? `${error.message} (${etcd})` : error.message;
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
  const refusal = etcdRefusal(err);
  // A learner's refusal is worth another attempt on every version (another endpoint may serve the
  // call, the learner may be promoted), not only where its gRPC code is one etcd3 calls recoverable.
  return (
    refusal === 'leader-changed' || refusal === 'no-leader' || refusal === 'not-leader' || refusal === 'request-timed-out' || refusal === 'learner-rpc'
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

function isCredentialError(err: unknown): boolean {
  const refusal = err instanceof Error ? ruleFor(err.message)?.refusal : undefined;
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
