/**
 * What a join call does (docs/api.md §4 POST /v1/members/join), decided from the
 * member list, the members' status and what the call has sent. Pure.
 *
 *   no matching member, no peer URL     → throws bad-request
 *   no matching member, learner wanted
 *     while another learner exists      → throws busy (etcd allows one learner)
 *   no matching member                  → probe; then add (a voter only when quorum stays safe)
 *   matching member                     → as `decideFound` (promote-decision.ts)
 */
import { AgentError } from '../proto/errors';
import type { Member, MemberList } from '../proto/types';
import { requireQuorum, withMember, type Answer, type NeedsProbe, type Sent } from './answer';
import { describeMember, matchMember, toConflictError } from './match';
import type { ClusterProbe } from './probe';
import { decideFound } from './promote-decision';
import { checkVoterAdd } from './quorum';

/** The member a join asks for: its name, its peer URLs (requested or from the template), learner first or not. */
export interface JoinWanted {
  name: string;
  peerURLs: string[];
  learner: boolean;
}

/** A join's next step: answer, look at the members first, add the member, or promote its learner. */
export type JoinDecision = { kind: 'answer'; answer: Answer } | NeedsProbe | { kind: 'add' } | { kind: 'promote'; member: Member };

/** Decides a join; see the table above. Throws conflict, busy, bad-request, unavailable or unsafe. */
export function decideJoin(wanted: JoinWanted, list: MemberList, probe: ClusterProbe | undefined, sent: Sent): JoinDecision {
  const found = matchMember(list.members, { name: wanted.name, peerURLs: wanted.peerURLs });
  if (found.kind === 'conflict') throw toConflictError(found);
  if (found.kind === 'match') return decideFound(list, found.member, probe, sent);

  if (wanted.peerURLs.length === 0) {
    throw new AgentError('bad-request', `no peer URL for ${wanted.name}: send peerURLs or set ETCD_AGENT_PEER_URL_TEMPLATE`, {
      details: { name: wanted.name },
    });
  }
  const learner = list.members.find((m) => m.isLearner);
  if (wanted.learner && learner !== undefined) {
    throw new AgentError(
      'busy',
      `etcd allows one learner at a time and ${describeMember(learner)} is still a learner; call again once it is promoted or removed`,
      { details: { learner } },
    );
  }
  if (probe === undefined) return { kind: 'probe' };
  requireQuorum(probe);
  if (!wanted.learner) {
    const verdict = checkVoterAdd({ voters: probe.voters.length, healthyVoters: probe.healthyVoters, name: wanted.name });
    if (!verdict.safe) throw new AgentError('unsafe', verdict.message, { details: verdict.details });
  }
  return { kind: 'add' };
}

/** The answer once etcd accepted MemberAdd: the member is listed, unstarted, until its etcd starts. */
export function addedAnswer(list: MemberList, added: Member): Answer {
  return { outcome: 'added', complete: false, phase: 'unstarted', member: added, list: withMember(list, added) };
}
