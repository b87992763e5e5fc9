/**
 * The tables by which etcd's gRPC failures are cast into the contract's error codes: etcd's own
 * message text (message → refusal and code), then etcd3's error class (class → code). The message
 * table comes first because etcd's words say why a change was refused; the class only says how the
 * call failed.
 *
 * Invariant: this is the one place etcd's wording is matched. Everything else asks for the typed
 * `EtcdRefusal` (errors.ts `etcdRefusal`), so a new etcd message is one row here.
 */
import { isBrokenCircuitError } from 'cockatiel';
import type { ErrorCode } from '../proto/errors';
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

/** One row of the message table: etcd's words, the refusal they are, and what the agent answers. */
export interface MessageRule {
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
  {
    text: 'required revision is a future revision',
    refusal: 'future-revision',
    code: 'bad-request',
    say: 'the revision asked for is beyond the current one',
  },
  // TLS handshakes that fail on configuration, not on the network (grpc-js/OpenSSL wording).
  ...['alert bad certificate', 'alert certificate required', 'alert unknown ca'].map((text) => ({
    text,
    refusal: 'tls' as const,
    code: 'unavailable' as const,
    say: 'etcd refused the agent TLS client certificate (ETCD_AGENT_ETCD_CERT_FILE / _KEY_FILE missing, or not signed by a CA etcd trusts)',
  })),
  ...[
    'unable to verify the first certificate',
    'self signed certificate',
    'self-signed certificate',
    'unable to get local issuer certificate',
  ].map((text) => ({
    text,
    refusal: 'tls' as const,
    code: 'unavailable' as const,
    say: 'the agent does not trust the TLS certificate of etcd (ETCD_AGENT_ETCD_CA_FILE is not the CA that signed it)',
  })),
  { text: 'certificate has expired', refusal: 'tls', code: 'unavailable', say: 'a TLS certificate between the agent and etcd has expired' },
  {
    text: "does not match certificate's altnames",
    refusal: 'tls',
    code: 'unavailable',
    say: 'the TLS certificate of etcd does not name the endpoint host',
  },
  {
    text: 'wrong version number',
    refusal: 'tls',
    code: 'unavailable',
    say: 'the etcd endpoint does not speak TLS (once ETCD_AGENT_ETCD_CA_FILE is set, every endpoint is reached over TLS)',
  },
];

/** One row of the class table: an etcd3 (or breaker) error class, and what the agent answers. */
export interface ClassRule {
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
        (e instanceof lib.EtcdAuthenticationFailedError ||
          e instanceof lib.GRPCUnauthenticatedError ||
          e instanceof lib.EtcdInvalidAuthTokenError)
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

/** The etcd3 error classes the tables and the mapping read. */
export type Etcd3ErrorClass =
  | 'ClientClosedError'
  | 'EtcdAuthenticationFailedError'
  | 'EtcdPermissionDeniedError'
  | 'GRPCDeadlineExceededError'
  | 'GRPCUnauthenticatedError'
  | 'GRPCUnavailableError';

/** `err instanceof` etcd3's class `name`, without loading etcd3 for an error it cannot have made. */
export function isEtcd3(err: unknown, name: Etcd3ErrorClass): boolean {
  const lib = etcd3For(err);
  return lib !== undefined && err instanceof lib[name];
}

/** The first row of the message table whose words `message` holds. */
export function messageRule(message: string): MessageRule | undefined {
  return MESSAGE_RULES.find((r) => (typeof r.text === 'string' ? message.includes(r.text) : r.text.test(message)));
}

/** The first row of the class table `err` is an instance of. */
export function classRule(err: unknown): ClassRule | undefined {
  return CLASS_RULES.find((r) => r.is(err));
}
