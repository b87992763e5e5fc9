/**
 * Which member a backup's snapshot comes from (pure). Only from a healthy voter of a cluster that has
 * a quorum: a member that answered Status, knows the leader the majority knows, and is not lagging
 * (health/lag.ts). A follower is preferred, so the leader's disk and network serve the cluster's
 * writes and not a snapshot stream; among followers the one furthest applied, then by name, so every
 * agent picks the same member for the same facts. Learners are never used: a learner may be far
 * behind and is not part of what the cluster acknowledged.
 */
import { lagOf, leaderIndex } from '../health/lag';
import type { Member, MemberStatus } from '../proto/types';

/** What one member's Status call gave. */
export type StatusAnswer = { status: MemberStatus } | { error: string };

/** The decision: the member to snapshot, or why none may be. */
export type SourceDecision =
  | { kind: 'member'; member: Member; clientURL: string; status: MemberStatus; reason: string }
  | { kind: 'none'; reason: string; members: { name: string; why: string }[] };

/** Picks the snapshot's member from the member list and each member's Status answer (by member id). */
export function decideSource(members: Member[], answers: Map<string, StatusAnswer>): SourceDecision {
  const voters = members.filter((m) => !m.isLearner);
  const statusById = new Map<string, { status: MemberStatus }>();
  for (const [id, answer] of answers) if ('status' in answer) statusById.set(id, answer);
  const leaderVotes = new Map<string, number>();
  for (const v of voters) {
    const leader = statusById.get(v.id)?.status.leaderId;
    if (leader !== undefined && leader !== '0') leaderVotes.set(leader, (leaderVotes.get(leader) ?? 0) + 1);
  }
  const [leaderId, votes] = [...leaderVotes].sort((a, b) => b[1] - a[1])[0] ?? ['0', 0];
  const quorum = Math.floor(voters.length / 2) + 1;
  const why = new Map<string, string>();
  if (votes < quorum) {
    for (const m of members) why.set(m.id, whyOf(m, answers, '0') ?? 'no quorum agrees on a leader');
    return {
      kind: 'none',
      reason: `no quorum: ${votes} of ${voters.length} voters agree on a leader, ${quorum} are needed`,
      members: list(members, why),
    };
  }
  const reference = leaderIndex(leaderId, members, statusById);
  const healthy: { member: Member; status: MemberStatus }[] = [];
  for (const m of members) {
    const problem = whyOf(m, answers, leaderId) ?? lagOf(m, (answers.get(m.id) as { status: MemberStatus }).status, reference);
    if (problem === undefined) healthy.push({ member: m, status: (answers.get(m.id) as { status: MemberStatus }).status });
    else why.set(m.id, problem);
  }
  if (healthy.length === 0) return { kind: 'none', reason: 'no voter is healthy', members: list(members, why) };
  healthy.sort(
    (a, b) =>
      Number(a.member.id === leaderId) - Number(b.member.id === leaderId) ||
      b.status.raftAppliedIndex - a.status.raftAppliedIndex ||
      (a.member.name < b.member.name ? -1 : a.member.name > b.member.name ? 1 : 0),
  );
  const chosen = healthy[0];
  const isLeader = chosen.member.id === leaderId;
  return {
    kind: 'member',
    member: chosen.member,
    clientURL: chosen.member.clientURLs[0],
    status: chosen.status,
    reason: isLeader
      ? `the leader ${chosen.member.name}: no follower is healthy`
      : `the follower ${chosen.member.name}, healthy at applied index ${chosen.status.raftAppliedIndex}`,
  };
}

/** Why a member cannot be the source before its lag is looked at, or undefined. */
function whyOf(m: Member, answers: Map<string, StatusAnswer>, leaderId: string): string | undefined {
  if (m.isLearner) return 'a learner';
  if (!m.started || m.clientURLs.length === 0) return 'not started';
  const answer = answers.get(m.id);
  if (answer === undefined) return 'not asked';
  if ('error' in answer) return `no Status answer: ${answer.error}`;
  if (leaderId !== '0' && answer.status.leaderId !== leaderId) {
    return answer.status.leaderId === '0' ? 'knows no leader' : `follows ${answer.status.leaderId}, not the quorum's leader ${leaderId}`;
  }
  return undefined;
}

function list(members: Member[], why: Map<string, string>): { name: string; why: string }[] {
  return members.filter((m) => why.has(m.id)).map((m) => ({ name: m.name || m.id, why: why.get(m.id) as string }));
}
