/**
 * Member lists and probes for the decision tables of test/unit/*-decision.test.ts:
 * members `a`, `b`, … named `etcd-a`, … with peer URL `http://etcd-a:2380`, and a probe
 * built from what each member answered (its leader and its raft index) or `silent`.
 */
import type { ChangeKind } from '../../agent/etcd/cluster-client';
import type { Answer } from '../../agent/membership/answer';
import type { JoinDecision } from '../../agent/membership/join-decision';
import type { LeaveDecision } from '../../agent/membership/leave-decision';
import { ClusterProbe, type MemberProbe } from '../../agent/membership/probe';
import type { PromoteDecision } from '../../agent/membership/promote-decision';
import type { TransferDecision } from '../../agent/membership/transfer-decision';
import { isAgentError } from '../../agent/proto/errors';
import type { Member, MemberList, MemberStatus } from '../../agent/proto/types';

/** A member: a started voter unless told otherwise; an unstarted one has no name and no client URL. */
export function member(id: string, opts: { learner?: boolean; started?: boolean } = {}): Member {
  const started = opts.started ?? true;
  return {
    id,
    name: started ? `etcd-${id}` : '',
    peerURLs: [`http://etcd-${id}:2380`],
    clientURLs: started ? [`http://etcd-${id}:2379`] : [],
    isLearner: opts.learner ?? !started,
    started,
  };
}

/** A learner (started unless told otherwise). */
export function learner(id: string, started = true): Member {
  return member(id, { learner: true, started });
}

/** A member list of `members`. */
export function list(...members: Member[]): MemberList {
  return { clusterId: 'c1', answeredBy: 'a', raftTerm: 2, members };
}

/** What one member said: `[leader it names, its raft index]`, or nothing. */
export type Said = [leader: string, index: number] | 'silent';

/** The probe of `of`: every started member answers as `said` tells (members it leaves out are silent). */
export function probe(of: MemberList, said: Record<string, Said>): ClusterProbe {
  return new ClusterProbe(
    of.members.map((m): MemberProbe => {
      const s = said[m.id];
      const url = m.clientURLs[0];
      if (url === undefined) return { member: m, error: 'no client URL (unstarted)' };
      if (s === undefined || s === 'silent') return { member: m, url, error: 'silent' };
      const [leaderId, raftIndex] = s;
      return {
        member: m,
        url,
        status: { ...memberStatus(m.id, leaderId, raftIndex), isLearner: m.isLearner, version: '3.4.23' },
      };
    }),
  );
}

/** A member's Status answer: naming `leaderId`, at raft (and applied) index `index`, term 2, a voter of 3.6.16. */
export function memberStatus(memberId: string, leaderId = 'a', index = 9): MemberStatus {
  return {
    memberId,
    leaderId,
    raftTerm: 2,
    raftIndex: index,
    raftAppliedIndex: index,
    dbSizeBytes: 1,
    dbSizeInUseBytes: 1,
    revision: 1,
    isLearner: false,
    version: '3.6.16',
    errors: [],
    latencyMs: 1,
  };
}

/** Every member of `of` answers, naming `leader`, all at raft index 100. */
export function allAnswer(of: MemberList, leader = 'a'): ClusterProbe {
  return probe(of, Object.fromEntries(of.members.map((m) => [m.id, [leader, 100] as Said])));
}

/** The set of RPCs a call has sent. */
export function sent(...kinds: ChangeKind[]): ReadonlySet<ChangeKind> {
  return new Set(kinds);
}

/**
 * A decision (or the error deciding threw) in one line, for tables: `probe`, `add`, `promote d`,
 * `move-leader a→b`, `remove c`, `answer removed c complete`, `throws unsafe`.
 */
export function said(decide: () => JoinDecision | LeaveDecision | PromoteDecision | TransferDecision): string {
  let decision;
  try {
    decision = decide();
  } catch (err) {
    if (isAgentError(err)) return `throws ${err.code}`;
    throw err;
  }
  switch (decision.kind) {
    case 'answer':
      return describeAnswer(decision.answer);
    case 'promote':
    case 'remove':
      return `${decision.kind} ${decision.member.id}`;
    case 'move-leader':
      return `move-leader ${decision.from.member.id}→${decision.to.member.id}`;
    default:
      return decision.kind;
  }
}

/** An answer in one line: outcome, member, phase, `complete` or not, `leader x`, `transferred`. */
export function describeAnswer(a: Answer): string {
  return [
    'answer',
    a.outcome,
    a.member?.id,
    a.phase,
    a.complete ? 'complete' : 'incomplete',
    a.leader === undefined ? undefined : `leader ${a.leader.id}`,
    a.leaderTransferred === true ? 'transferred' : undefined,
  ]
    .filter((part) => part !== undefined)
    .join(' ');
}
