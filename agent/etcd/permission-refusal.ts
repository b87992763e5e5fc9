/**
 * etcd's permission refusals, said so an operator can act: which RPC of the agent etcd denied, to
 * which user, by which rule of which etcd version, and the grant that lifts it. Not retryable: only
 * an operator's grant changes the answer.
 *
 * Invariant: a refusal is said once, by the innermost call that knew which RPC it was; any other
 * failure passes through as `toAgentError` maps it.
 */
import { AgentError } from '../proto/errors';
import { isEtcd3 } from './error-tables';
import { toAgentError } from './errors';

/** The etcd RPCs of the agent whose permission etcd checks, each differently by version (docs/etcd-versions.md "etcd authentication, by version"). */
export type GuardedRpc = 'member-list' | 'barrier' | 'status' | 'alarm' | 'move-leader' | 'add' | 'remove' | 'promote';

/**
 * What etcd requires of the user for each RPC while its authentication is on: checked on 3.4.23,
 * 3.5.35, 3.6.16 and 3.7.3 by test/integration/etcd-tls-auth.test.ts, the other patch releases as
 * etcd's source has it (the CVE-2026-33413 fix of 3.4.42, 3.5.28 and 3.6.9 closed MemberList, the
 * alarm list and Status to all but the root role; later patches open them to any user again).
 */
export const PERMISSION_RULES: Readonly<Record<GuardedRpc, { rpc: string; rule: string; role?: 'prefix' }>> = {
  add: { rpc: 'MemberAdd', rule: 'membership changes need the root role on every etcd version' },
  remove: { rpc: 'MemberRemove', rule: 'membership changes need the root role on every etcd version' },
  promote: { rpc: 'MemberPromote', rule: 'membership changes need the root role on every etcd version' },
  'move-leader': {
    rpc: 'MoveLeader',
    rule: 'it needs the root role from etcd 3.5.28 and in 3.6 and 3.7 (3.4 and 3.5 up to 3.5.27 check no permission)',
  },
  status: {
    rpc: 'Status',
    rule: 'it needs the root role on etcd 3.4.42 and later 3.4, 3.5.28 to 3.5.31 and 3.6.0 to 3.6.11, any user from 3.5.32 and 3.6.12',
  },
  alarm: {
    rpc: 'the alarm list',
    rule: 'it needs the root role on etcd 3.4.42, 3.5.28 and 3.6.9, any user from 3.4.43, 3.5.29 and 3.6.10',
  },
  'member-list': {
    rpc: 'MemberList',
    rule: 'it needs the root role on etcd 3.4.42, 3.5.28 and 3.6.9, any user from 3.4.43, 3.5.29 and 3.6.10',
  },
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
