/**
 * This pod's member's role, for kbagent's roleProbe, `GET /v1/role` and `/v1/health/local`, read from
 * the shared health observation: this pod's own Status (ETCD_AGENT_LOCAL_ENDPOINT) and the
 * cluster observation beside it, both within the max age. No etcd call of its own. Pure.
 *
 * The leader is named by the agent's one rule (membership/leader.ts `roleOf`, a quorum's view), so no
 * two answers of the agent name different leaders. When there is no role to name, the reading says
 * why, as a fact:
 * - `not-answering`: this pod's etcd did not answer its status call;
 * - `not-listed`: it answered as a member that the observed member list does not list (removed, or
 *   a member of another cluster);
 * - `not-observed`: no member list was observed within the max age, so membership and the leader are
 *   not known.
 * A learner's own Status is authoritative that it is a learner (a learner refuses MemberList on etcd
 * 3.4): `learner` needs no list, unless a list shows it removed.
 */
import { roleOf, type Role } from '../membership/leader';
import { AgentError } from '../proto/errors';
import type { ClusterHealth, ObservedFacts, RoleReading, StatusProbe } from './types';

export type { Role, RoleReading };

/** The reading from this pod's status probe and the cluster observation (undefined: none finished in time). */
export function readRole(probe: StatusProbe, observation: { facts: ObservedFacts; health: ClusterHealth } | undefined): RoleReading {
  const status = probe.status;
  if (status === undefined) return { kind: 'not-answering', endpoint: probe.url, error: probe.error ?? 'no answer' };
  const list = observation?.facts.memberList;
  if (list === undefined) return status.isLearner ? { kind: 'role', role: 'learner' } : { kind: 'not-observed' };
  const member = list.members.find((m) => m.id === status.memberId);
  if (member === undefined) return { kind: 'not-listed', memberId: status.memberId };
  return { kind: 'role', role: roleOf(member, observation?.health.leader?.id) };
}

/**
 * The contract's error for a reading without a role (non-2xx for GET /v1/role, `failed` for kbagent):
 * `details.reading` names the fact; `maxAgeMs` is the observation's bound, for the message.
 */
export function noRoleError(reading: Exclude<RoleReading, { kind: 'role' }>, maxAgeMs: number): AgentError {
  switch (reading.kind) {
    case 'not-answering':
      return new AgentError('unavailable', `this pod's etcd at ${reading.endpoint} does not answer: ${reading.error}`, {
        details: { reading: reading.kind, endpoint: reading.endpoint },
      });
    case 'not-listed':
      return new AgentError('not-found', `this pod's etcd answers as member ${reading.memberId}, which the member list does not list`, {
        details: { reading: reading.kind, memberId: reading.memberId },
      });
    case 'not-observed':
      return new AgentError(
        'unavailable',
        `no member list was observed within ${maxAgeMs} ms, so this pod's membership and the leader are not known`,
        {
          details: { reading: reading.kind },
        },
      );
  }
}
