/**
 * What a membership action answers, as its pure decision states it, and the
 * few rules every decision shares: the quorum guard and the list after a change.
 * No I/O: `run.ts` turns an `Answer` into the contract's body.
 */
import type { ChangeKind } from '../etcd/cluster-client';
import { AgentError } from '../proto/errors';
import type { ActionResult, Member, MemberList } from '../proto/types';
import type { ClusterProbe } from './probe';
import { hasQuorum, quorumOf } from './quorum';

/**
 * The fields of an answer that a decision sets (the contract's own fields, and the list the
 * answer describes, after the change); the run adds the action, the cluster summary and the duration.
 */
export type Answer = Pick<ActionResult, 'outcome' | 'complete' | 'phase' | 'member' | 'leader'> & {
  list: MemberList;
  /** True when this call moved leadership (docs/api.md §4 `leaderTransferred`); false when absent. */
  leaderTransferred?: boolean;
};

/** The RPCs a call has sent so far (whatever etcd answered): what its decisions know of the past. */
export type Sent = ReadonlySet<ChangeKind>;

/**
 * A decision that cannot be made from the member list alone: it asks for the members' live status
 * first (`probe`), so that calls with nothing to do never pay for a probe round.
 */
export interface NeedsProbe {
  kind: 'probe';
}

/** `list` with `member` replaced (or appended when new, or left out when `remove`). */
export function withMember(list: MemberList, member: Member, remove = false): MemberList {
  if (remove) return { ...list, members: list.members.filter((m) => m.id !== member.id) };
  const known = list.members.some((m) => m.id === member.id);
  return { ...list, members: known ? list.members.map((m) => (m.id === member.id ? member : m)) : [...list.members, member] };
}

/**
 * Throws `unavailable` unless the voters that answered make a quorum; the message and `details.silent`
 * say why each voter that did not answer is counted out (refused, no answer in time, …), so a caller
 * can tell a member down from one that answers too slowly.
 */
export function requireQuorum(probe: ClusterProbe): void {
  const voters = probe.voters.length;
  const healthy = probe.healthyVoters;
  if (!hasQuorum(voters, healthy)) {
    const silent = probe.probes
      .filter((p) => !p.member.isLearner && p.status === undefined)
      .map((p) => ({ name: p.member.name || p.member.id, error: p.error ?? 'not asked: it has no client URL' }));
    const why = silent.map((s) => `${s.name}: ${s.error}`).join('; ');
    throw new AgentError(
      'unavailable',
      `only ${healthy} of ${voters} voters answered a status call; a quorum needs ${quorumOf(voters)} (${why})`,
      {
        details: { voters, healthyVoters: healthy, required: quorumOf(voters), silent },
      },
    );
  }
}
