/**
 * Health classification (CONTRACT §4 GET /v1/health, /v1/health/local). Pure: what one
 * observation saw goes in, the contract's answer comes out.
 *
 * The rules, in one place:
 * - A voter is healthy only when it answered a status call in this observation and names the
 *   leader a quorum of voters names. A pod being Ready, or an earlier answer, is not evidence.
 * - The leader is the id that a quorum of the answering voters report (membership/leader.ts, the
 *   rule the membership probe and roleProbe use too). Without one there is no leader, and
 *   `healthyVoters` is the largest group of answering voters that agree on one id.
 * - `healthy`: the member list was read in this observation, every member answered, all name the
 *   leader, none lags, no alarm is raised. `degraded`: quorum and a leader, but anything else.
 *   `unavailable`: nothing answered, or no quorum of healthy voters. (`unknown` is the observer's:
 *   it means no observation finished in time, so there is nothing to classify.)
 * - A member list that could not be read in this observation never yields `healthy`: the last one
 *   read only says whom to ask, and is used to count a quorum (at best `degraded`).
 */
import type { Alarm } from '../etcd/wire';
import { electLeader } from '../membership/leader';
import { faultTolerance, isLearnerInSync, LEARNER_READY_RATIO, quorumOf } from '../membership/quorum';
import type { Member, MemberStatus, OperationRecord } from '../proto/types';
import { canonicalUrl } from '../proto/urls';

export { canonicalUrl } from '../proto/urls';

/** The contract's health states. */
export type HealthStatus = 'healthy' | 'degraded' | 'unavailable' | 'unknown';

/**
 * A voter whose applied index is this far behind the leader's committed index is "lagging": it is
 * etcd's own limit (`maxGapBetweenApplyAndCommitIndex`), past which a member refuses requests.
 */
export const VOTER_MAX_APPLY_LAG = 5000;

/** One status call: the client URL asked, and the answer or why there was none. */
export interface StatusProbe {
  url: string;
  status?: MemberStatus;
  error?: string;
}

/** Everything one observation saw: the input of `classify`. */
export interface ObservedFacts {
  /** The member list: read in this observation (`fresh`), else the last one read (`readAt`), else none. */
  memberList?: { members: Member[]; fresh: boolean; readAt: string };
  /** Why the member list could not be read in this observation. */
  memberListError?: string;
  probes: StatusProbe[];
  /** The alarm list; undefined when it could not be read (`alarmsError`). */
  alarms?: Alarm[];
  alarmsError?: string;
  /** Operation records; undefined when not asked for or not read (`operationsError`). */
  operations?: OperationRecord[];
  operationsError?: string;
}

/** One member as `/v1/health` shows it; the numbers are null when it did not answer. */
export interface MemberHealth {
  id: string;
  name: string;
  isLearner: boolean;
  started: boolean;
  reachable: boolean;
  isLeader: boolean;
  raftTerm: number | null;
  raftIndex: number | null;
  raftAppliedIndex: number | null;
  dbSizeBytes: number | null;
  latencyMs: number | null;
  errors: string[];
}

/** Quorum counts of one observation. */
export interface QuorumHealth {
  voters: number;
  healthyVoters: number;
  required: number;
  hasQuorum: boolean;
  faultTolerance: number;
}

/** An alarm raised in the cluster, with the name of the member it is about. */
export interface AlarmHealth {
  memberId: string;
  name: string;
  alarm: string;
}

/** The body of `/v1/health` without `requestId`, `observedAt` and `ageMs`. */
export interface ClusterHealth {
  status: HealthStatus;
  /** Null only for `unknown`. */
  quorum: QuorumHealth | null;
  leader: { id: string; name: string } | null;
  members: MemberHealth[];
  alarms: AlarmHealth[];
  errors: string[];
  expected?: { missing: string[]; unexpected: string[] };
  operations?: OperationRecord[];
}

/** `/v1/health/local`: this pod's member, its role, and whether it is ready (200) or not (503). */
export interface LocalHealth {
  ready: boolean;
  member: MemberHealth & { role: 'leader' | 'follower' | 'learner' | null };
}

/** Classifies one observation (CONTRACT §4 table). */
export function classify(facts: ObservedFacts): ClusterHealth {
  const errors: string[] = [];
  if (facts.memberListError !== undefined) errors.push(`member list: ${facts.memberListError}`);
  if (facts.alarmsError !== undefined) errors.push(`alarm list: ${facts.alarmsError}`);
  if (facts.operationsError !== undefined) errors.push(`operation records: ${facts.operationsError}`);
  const answered = facts.probes.filter((p): p is StatusProbe & { status: MemberStatus } => p.status !== undefined);
  const optional = facts.operations === undefined ? {} : { operations: facts.operations };

  const list = facts.memberList;
  if (list === undefined) {
    const why = answered.length === 0 ? 'no endpoint answered' : 'the member list could not be read, and none was read before';
    return { status: 'unavailable', quorum: emptyQuorum(), leader: null, members: [], alarms: [], errors: [why, ...errors], ...optional };
  }
  if (!list.fresh) errors.push(`the member list could not be read in this observation; using the one read at ${list.readAt}`);

  const statusById = new Map<string, { url: string; status: MemberStatus }>();
  for (const p of answered) if (!statusById.has(p.status.memberId)) statusById.set(p.status.memberId, p);
  const listedIds = new Set(list.members.map((m) => m.id));
  for (const p of answered) {
    if (!listedIds.has(p.status.memberId)) {
      errors.push(`${p.url} answered as member ${p.status.memberId}, which is not in the member list`);
    }
  }

  const voters = list.members.filter((m) => !m.isLearner).length;
  const verdict = electLeader(
    voters,
    list.members.flatMap((m) => {
      const status = m.isLearner ? undefined : statusById.get(m.id)?.status;
      return status === undefined ? [] : [{ leaderId: status.leaderId, raftTerm: status.raftTerm }];
    }),
  );
  const required = quorumOf(voters);
  const healthyVoters = verdict.agreeing;
  const leaderId = verdict.leaderId;
  const quorum: QuorumHealth = {
    voters,
    healthyVoters,
    required,
    hasQuorum: healthyVoters >= required,
    faultTolerance: faultTolerance(voters, healthyVoters),
  };
  const leaderMember = leaderId === undefined ? undefined : list.members.find((m) => m.id === leaderId);
  const leader = leaderId === undefined ? null : { id: leaderId, name: leaderMember?.name ?? '' };
  const referenceIndex = leaderId === undefined ? undefined : leaderIndex(leaderId, list.members, statusById);

  let troubled = false;
  const members = list.members.map((m): MemberHealth => {
    const answer = statusById.get(m.id)?.status;
    const memberErrors: string[] = [];
    if (answer === undefined) {
      troubled = true;
      memberErrors.push(whyNoAnswer(m, facts.probes));
    } else {
      memberErrors.push(...answer.errors);
      const view = leaderView(answer, leaderId);
      const lag = lagOf(m, answer, referenceIndex);
      if (view !== undefined || lag !== undefined) troubled = true;
      if (view !== undefined) memberErrors.push(view);
      if (lag !== undefined) memberErrors.push(lag);
    }
    return {
      id: m.id,
      name: m.name,
      isLearner: m.isLearner,
      started: m.started,
      reachable: answer !== undefined,
      isLeader: m.id === leaderId,
      raftTerm: answer?.raftTerm ?? null,
      raftIndex: answer?.raftIndex ?? null,
      raftAppliedIndex: answer?.raftAppliedIndex ?? null,
      dbSizeBytes: answer?.dbSizeBytes ?? null,
      latencyMs: answer?.latencyMs ?? null,
      errors: memberErrors,
    };
  });
  const alarms = collectAlarms(facts.alarms ?? [], answered, list.members);

  let status: HealthStatus;
  if (answered.length === 0) {
    status = 'unavailable';
    errors.unshift('no endpoint answered');
  } else if (!quorum.hasQuorum) {
    status = 'unavailable';
    errors.unshift(
      `${healthyVoters} of ${voters} voters answered and agree on a leader; quorum needs ${required}` +
        (verdict.mostNamed === undefined ? ' (no answering voter knows a leader)' : ''),
    );
  } else if (!list.fresh || troubled || alarms.length > 0) {
    status = 'degraded';
  } else {
    status = 'healthy';
  }
  return { status, quorum, leader, members, alarms, errors, ...optional };
}

/**
 * Adds `expected` (CONTRACT §4 `?expected=`): names expected but not members, and started
 * members not expected. Any difference makes a `healthy` answer `degraded`.
 */
export function withExpected(health: ClusterHealth, expected: readonly string[]): ClusterHealth {
  if (health.status === 'unknown') return health;
  const names = health.members.filter((m) => m.started).map((m) => m.name);
  const missing = expected.filter((name) => !names.includes(name));
  const unexpected = names.filter((name) => !expected.includes(name));
  const differs = missing.length > 0 || unexpected.length > 0;
  return {
    ...health,
    status: differs && health.status === 'healthy' ? 'degraded' : health.status,
    expected: { missing, unexpected },
  };
}

/**
 * This pod's member (CONTRACT §4 `/v1/health/local`): ready when its own endpoint answered, it is
 * in the member list read in this observation, and, as a learner, it is in sync with the leader.
 * `cluster` is undefined when no cluster observation finished in time.
 */
export function classifyLocal(
  probe: StatusProbe,
  observation: { facts: ObservedFacts; health: ClusterHealth } | undefined,
  memberName: string,
): LocalHealth {
  const list = observation?.facts.memberList;
  const status = probe.status;
  const listed =
    status !== undefined
      ? list?.members.find((m) => m.id === status.memberId)
      : list?.members.find((m) => m.started && m.name === memberName);
  const member = {
    id: status?.memberId ?? listed?.id ?? '',
    name: listed?.name ?? memberName,
    isLearner: listed?.isLearner ?? status?.isLearner ?? false,
    started: listed?.started ?? status !== undefined,
    reachable: status !== undefined,
    isLeader: status !== undefined && status.leaderId === status.memberId,
    raftTerm: status?.raftTerm ?? null,
    raftIndex: status?.raftIndex ?? null,
    raftAppliedIndex: status?.raftAppliedIndex ?? null,
    dbSizeBytes: status?.dbSizeBytes ?? null,
    latencyMs: status?.latencyMs ?? null,
    errors: [...(status?.errors ?? [])],
  };
  if (status === undefined) {
    member.errors.push(`${probe.url} did not answer: ${probe.error ?? 'no answer'}`);
    return { ready: false, member: { ...member, role: null } };
  }
  const role: 'leader' | 'follower' | 'learner' = member.isLeader ? 'leader' : member.isLearner ? 'learner' : 'follower';
  const local = { ...member, role };
  const fail = (why: string): LocalHealth => ({ ready: false, member: { ...local, errors: [...local.errors, why] } });
  if (observation === undefined || list === undefined) {
    return fail('the member list could not be read in time, so membership is not confirmed');
  }
  if (listed === undefined) return fail(`member ${status.memberId} is not in the member list`);
  if (!list.fresh) return fail('the member list could not be read in this observation, so membership is not confirmed');
  if (role === 'learner') {
    const leader = observation.health.members.find((m) => m.isLeader && m.reachable);
    if (leader?.raftIndex === null || leader?.raftIndex === undefined) {
      return fail('the leader did not answer, so it is not known whether this learner is in sync');
    }
    if (!isLearnerInSync(status.raftIndex, leader.raftIndex)) {
      return fail(learnerLag(status.raftIndex, leader.raftIndex));
    }
  }
  return { ready: true, member: local };
}

function emptyQuorum(): QuorumHealth {
  return { voters: 0, healthyVoters: 0, required: 1, hasQuorum: false, faultTolerance: 0 };
}

/** The committed index to measure lag against: the leader's own, else the highest one that agrees. */
function leaderIndex(leaderId: string, members: Member[], statusById: Map<string, { status: MemberStatus }>): number | undefined {
  const own = statusById.get(leaderId)?.status;
  if (own !== undefined) return own.raftIndex;
  const agreeing = members
    .map((m) => statusById.get(m.id)?.status)
    .filter((s): s is MemberStatus => s !== undefined && s.leaderId === leaderId);
  return agreeing.length === 0 ? undefined : Math.max(...agreeing.map((s) => s.raftIndex));
}

function whyNoAnswer(member: Member, probes: StatusProbe[]): string {
  if (!member.started) return 'not started (added, but its etcd has not joined yet)';
  const url = member.clientURLs[0];
  if (url === undefined) return 'no client URL to ask';
  const probe = probes.find((p) => sameUrl(p.url, url));
  if (probe === undefined) return `not asked in this observation (${url})`;
  if (probe.status !== undefined) return `${url} answered as member ${probe.status.memberId}`;
  return `${url}: ${probe.error ?? 'no answer'}`;
}

function leaderView(status: MemberStatus, leaderId: string | undefined): string | undefined {
  if (leaderId === undefined || status.leaderId === leaderId) return undefined;
  const sees = status.leaderId === '0' ? 'no leader' : `leader ${status.leaderId}`;
  return `sees ${sees}, not the leader ${leaderId} a quorum agrees on`;
}

function lagOf(member: Member, status: MemberStatus, reference: number | undefined): string | undefined {
  if (reference === undefined) return undefined;
  if (member.isLearner) {
    return isLearnerInSync(status.raftIndex, reference) ? undefined : learnerLag(status.raftIndex, reference);
  }
  const behind = reference - status.raftAppliedIndex;
  return behind > VOTER_MAX_APPLY_LAG
    ? `lagging: applied index ${status.raftAppliedIndex} is ${behind} entries behind the leader's ${reference}`
    : undefined;
}

function learnerLag(index: number, leader: number): string {
  return `lagging: raft index ${index} is behind the leader's ${leader} (a learner is in sync at ${Math.ceil(leader * LEARNER_READY_RATIO)})`;
}

/** The alarm list, plus the alarms members report in their status (`memberID:… alarm:NOSPACE`), once each. */
function collectAlarms(listed: Alarm[], answered: Array<{ status: MemberStatus }>, members: Member[]): AlarmHealth[] {
  const seen = new Map<string, AlarmHealth>();
  const add = (memberId: string, alarm: string): void => {
    if (alarm === 'NONE' || alarm === '0') return;
    const key = `${memberId}/${alarm}`;
    if (seen.has(key)) return;
    seen.set(key, { memberId, name: members.find((m) => m.id === memberId)?.name ?? '', alarm });
  };
  for (const a of listed) add(a.memberId, a.alarm);
  for (const { status } of answered) {
    for (const text of status.errors) {
      const alarm = /alarm:\s*([A-Z]+)/.exec(text)?.[1];
      const memberId = /memberID:\s*(\d+)/.exec(text)?.[1];
      if (alarm !== undefined) add(memberId === undefined ? status.memberId : BigInt(memberId).toString(16), alarm);
    }
  }
  return [...seen.values()];
}

function sameUrl(a: string, b: string): boolean {
  return canonicalUrl(a) === canonicalUrl(b);
}
