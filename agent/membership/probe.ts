/**
 * A live look at the members before a membership change: every started member
 * is asked for its Status at its own client URL, in parallel, each within
 * `ETCD_AGENT_STATUS_TIMEOUT_MS`. "Healthy" means "answered just now" (docs/api.md
 * §4); a pod being Ready is not evidence. From the answers: the leader, and the
 * most up-to-date healthy voter to hand leadership to.
 */
import type { EtcdCluster } from '../etcd/cluster-client';
import { toAgentError } from '../etcd/errors';
import type { Deadline } from '../lib/deadline';
import type { Member, MemberStatus } from '../proto/types';
import { electLeader } from './leader';
import { isLearnerInSync } from './quorum';

/** What one member said, or why it said nothing. */
export interface MemberProbe {
  member: Member;
  /** The client URL it was asked at (undefined for a member with none, e.g. unstarted). */
  url?: string;
  status?: MemberStatus;
  error?: string;
}

/** The answers of one probe round. */
export class ClusterProbe {
  private readonly byId: Map<string, MemberProbe>;

  constructor(readonly probes: MemberProbe[]) {
    this.byId = new Map(probes.map((p) => [p.member.id, p]));
  }

  /** Voting members (learners excluded; an unstarted voter counts, as etcd counts it in its quorum). */
  get voters(): Member[] {
    return this.probes.filter((p) => !p.member.isLearner).map((p) => p.member);
  }

  /** Voters that answered their status call. */
  get healthyVoters(): number {
    return this.probes.filter((p) => !p.member.isLearner && p.status !== undefined).length;
  }

  /** Members asked (they have a client URL) that did not answer. */
  get silent(): MemberProbe[] {
    return this.probes.filter((p) => p.status === undefined && p.url !== undefined);
  }

  /** True when member `id` answered. */
  isHealthy(id: string): boolean {
    return this.byId.get(id)?.status !== undefined;
  }

  /** The probe of member `id`. */
  of(id: string): MemberProbe | undefined {
    return this.byId.get(id);
  }

  /**
   * The leader by the agent's one rule (leader.ts): the id a quorum of the voters name. Undefined
   * when no quorum of answering voters agrees on one, or it is not in the member list.
   */
  get leader(): MemberProbe | undefined {
    const votes = this.probes.flatMap((p) =>
      p.member.isLearner || p.status === undefined ? [] : [{ leaderId: p.status.leaderId, raftTerm: p.status.raftTerm }],
    );
    const { leaderId } = electLeader(this.voters.length, votes);
    return leaderId === undefined ? undefined : this.byId.get(leaderId);
  }

  /**
   * The healthy voter with the most applied log (ties: the higher committed index, then the lower
   * id, so the choice is stable), other than `excludeId`; the best target for leadership.
   */
  mostUpToDate(excludeId?: string): MemberProbe | undefined {
    const candidates = this.probes.filter(
      (p) => !p.member.isLearner && p.status !== undefined && p.member.id !== excludeId && p.url !== undefined,
    );
    candidates.sort(
      (a, b) =>
        (b.status?.raftAppliedIndex ?? 0) - (a.status?.raftAppliedIndex ?? 0) ||
        (b.status?.raftIndex ?? 0) - (a.status?.raftIndex ?? 0) ||
        a.member.id.localeCompare(b.member.id),
    );
    return candidates[0];
  }
}

/** Asks every member of `members` (with a client URL) for its status, in parallel. */
export async function probeMembers(
  cluster: Pick<EtcdCluster, 'memberStatus'>,
  members: Member[],
  timeoutMs: number,
): Promise<ClusterProbe> {
  const probes = await Promise.all(
    members.map(async (member): Promise<MemberProbe> => {
      const url = member.clientURLs[0];
      if (url === undefined) return { member, error: 'no client URL (unstarted)' };
      try {
        return { member, url, status: await cluster.memberStatus(url, timeoutMs) };
      } catch (err) {
        return { member, url, error: toAgentError(err).message };
      }
    }),
  );
  return new ClusterProbe(probes);
}

/**
 * `probe` with its silent members (asked, but no answer) asked once more, with `timeoutMs`, and
 * their new answers in place of the old: one answer slowed by a busy node, or by a channel
 * still connecting after a certificate rotation, must not read as a member down. A dead member
 * refuses at once, in either round; only a frozen or cut-off one costs the second wait.
 */
export async function reaskSilent(
  cluster: Pick<EtcdCluster, 'memberStatus'>,
  probe: ClusterProbe,
  timeoutMs: number,
): Promise<ClusterProbe> {
  const silent = probe.silent;
  if (silent.length === 0) return probe;
  const again = await probeMembers(
    cluster,
    silent.map((p) => p.member),
    timeoutMs,
  );
  return new ClusterProbe([...probe.probes.filter((p) => !silent.includes(p)), ...again.probes]);
}

/**
 * `reaskSilent` for a call with a deadline: the silent members get twice the configured Status
 * timeout, cut to what is left of `deadline`; once it has passed, `probe` stands as it is.
 */
export function reaskWithin(
  cluster: Pick<EtcdCluster, 'memberStatus'>,
  probe: ClusterProbe,
  statusTimeoutMs: number,
  deadline: Deadline,
): Promise<ClusterProbe> {
  if (deadline.expired()) return Promise.resolve(probe);
  return reaskSilent(cluster, probe, deadline.budget(2 * statusTimeoutMs));
}

/**
 * etcd's promote check (`isLearnerInSync`) applied to two statuses: their committed indexes
 * approximate it without sending a promote that would be refused.
 */
export function learnerLooksReady(learner: MemberStatus, leader: MemberStatus): boolean {
  return isLearnerInSync(learner.raftIndex, leader.raftIndex);
}
