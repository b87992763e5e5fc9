/**
 * Health classification of the cluster (CONTRACT §4 GET /v1/health). Pure: what one
 * observation saw goes in, the contract's answer comes out. This pod's own member
 * (/v1/health/local) is classified in classify-local.ts, lag in lag.ts, the shapes are types.ts.
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
import { faultTolerance, quorumOf } from '../membership/quorum';
import type { Member, MemberStatus } from '../proto/types';
import { canonicalUrl } from '../proto/urls';
import { lagOf, leaderIndex } from './lag';
import type { AlarmHealth, ClusterHealth, HealthStatus, MemberHealth, ObservedFacts, QuorumHealth, StatusProbe } from './types';

export { canonicalUrl } from '../proto/urls';

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
      // This pod's etcd container said why its etcd is not running: that comes first.
      if (facts.startNote !== undefined && m.started && m.name === facts.startNote.member) {
        memberErrors.push(facts.startNote.text);
        errors.push(`${m.name}: ${facts.startNote.text}`);
      }
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
      ...statusNumbers(answer),
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

/** The numbers of a member's status answer as `MemberHealth` shows them: null when it did not answer. */
export function statusNumbers(
  status: MemberStatus | undefined,
): Pick<MemberHealth, 'raftTerm' | 'raftIndex' | 'raftAppliedIndex' | 'dbSizeBytes' | 'latencyMs'> {
  return {
    raftTerm: status?.raftTerm ?? null,
    raftIndex: status?.raftIndex ?? null,
    raftAppliedIndex: status?.raftAppliedIndex ?? null,
    dbSizeBytes: status?.dbSizeBytes ?? null,
    latencyMs: status?.latencyMs ?? null,
  };
}

function emptyQuorum(): QuorumHealth {
  return { voters: 0, healthyVoters: 0, required: 1, hasQuorum: false, faultTolerance: 0 };
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
