/**
 * The one rule that names the etcd leader, for the membership probe (leave, transfer), `/v1/health`
 * and `roleProbe` alike, so that no two answers of the agent name different leaders. Pure.
 *
 * The leader is the member id that a quorum of the voters name as leader in their Status answers.
 * A voter that did not answer, or knows no leader (id "0"), names no one; learners do not vote. In a
 * split view (a deposed leader still naming itself in an old term, a minority that lost touch) the
 * quorum decides, not the highest term: an old leader cut off from the others never counts.
 */
import { quorumOf } from './quorum';

/** What one voter said: whom it names as leader, in which raft term. */
export interface LeaderVote {
  leaderId: string;
  raftTerm: number;
}

/** The rule's verdict: the leader (when a quorum names one) and the largest group naming one id. */
export interface LeaderVerdict {
  /** Set only when at least a quorum of `voters` name it. */
  leaderId?: string;
  /** The id most voters name (ties: the higher term, then the lower id), quorum or not. */
  mostNamed?: string;
  /** How many voters name `mostNamed`: the voters that agree on a leader. */
  agreeing: number;
  required: number;
}

/** Applies the rule to the answers of the voters (`voters` counts them all, answering or not). */
export function electLeader(voters: number, votes: readonly LeaderVote[]): LeaderVerdict {
  const required = quorumOf(voters);
  const tally = new Map<string, { count: number; term: number }>();
  for (const vote of votes) {
    if (vote.leaderId === '0' || vote.leaderId === '') continue;
    const entry = tally.get(vote.leaderId) ?? { count: 0, term: 0 };
    tally.set(vote.leaderId, { count: entry.count + 1, term: Math.max(entry.term, vote.raftTerm) });
  }
  const ranked = [...tally].sort(([a, x], [b, y]) => y.count - x.count || y.term - x.term || (a < b ? -1 : 1));
  if (ranked.length === 0) return { agreeing: 0, required };
  const [mostNamed, { count }] = ranked[0];
  return { ...(count >= required ? { leaderId: mostNamed } : {}), mostNamed, agreeing: count, required };
}

/** A member's role, as roleProbe, `GET /v1/role` and `/v1/health/local` name it. */
export type Role = 'leader' | 'follower' | 'learner';

/**
 * The one role rule: a learner is `learner`; a voter is `leader` when the leader rule above names
 * it (`leaderId`, undefined when no quorum names one), else `follower`.
 */
export function roleOf(member: { id: string; isLearner: boolean }, leaderId: string | undefined): Role {
  if (member.isLearner) return 'learner';
  return leaderId !== undefined && leaderId === member.id ? 'leader' : 'follower';
}
