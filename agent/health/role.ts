/**
 * This pod's member's role, for kbagent's roleProbe and `GET /v1/role`: who it is and whether it is
 * a learner from its own etcd (ETCD_AGENT_LOCAL_ENDPOINT), that it is still a member from the member
 * list, and who leads from the shared health observation, by the one role rule (membership/leader.ts
 * `roleOf`), so that no two answers of the agent name different leaders.
 */
import type { Config } from '../config';
import type { Deadline } from '../deadline';
import type { EtcdCluster } from '../etcd/cluster-client';
import { toAgentError } from '../etcd/errors';
import { roleOf, type Role } from '../membership/leader';
import { AgentError } from '../proto/errors';
import { ROLE_STATUS_MIN_MS } from '../timings';

export type { Role };

/** The leader the shared health observation names; `known: false` when no observation finished in time. */
export type LeaderView = () => Promise<{ known: boolean; id?: string }>;

/** What the role needs: this pod's etcd, the member list, and the observed leader. */
export interface RoleDeps {
  config: Pick<Config, 'localEndpoint' | 'statusTimeoutMs' | 'timeoutSeconds'>;
  cluster: Pick<EtcdCluster, 'memberStatus' | 'listMembers'>;
  leader: LeaderView;
}

/** This pod's member's role; `unavailable` when its etcd or the observation cannot say, `not-found` when it is no member. */
export async function localRole(deps: RoleDeps, deadline: Deadline): Promise<Role> {
  const { config, cluster } = deps;
  const timeoutMs = Math.max(1, Math.min(deadline.remainingMs(), Math.max(ROLE_STATUS_MIN_MS, config.statusTimeoutMs)));
  let status;
  try {
    status = await cluster.memberStatus(config.localEndpoint, timeoutMs);
  } catch (err) {
    const cause = toAgentError(err);
    throw new AgentError('unavailable', `this pod's etcd at ${config.localEndpoint} does not answer: ${cause.message}`, {
      cause: err,
    });
  }
  // A learner answers Status but refuses MemberList ("rpc not supported for learner"), and its
  // own Status is authoritative on that point: no list needed to say `learner`.
  if (status.isLearner) return roleOf({ id: status.memberId, isLearner: true }, undefined);
  const list = await cluster.listMembers(deadline);
  const member = list.members.find((m) => m.id === status.memberId);
  if (member === undefined) {
    throw new AgentError('not-found', `this pod's etcd (member ${status.memberId}) is not in the member list`, {
      details: { memberId: status.memberId },
    });
  }
  if (member.isLearner) return roleOf(member, undefined);
  // The same leader as /v1/health, leave and transfer name: a quorum's, not this member's own view.
  const view = await deps.leader();
  if (!view.known) throw new AgentError('unavailable', 'no health observation finished in time to say who leads');
  return roleOf(member, view.id);
}
