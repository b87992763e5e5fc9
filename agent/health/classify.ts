/**
 * Health classification of the cluster (docs/api.md §4 GET /v1/health). Pure: what one
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
import { noSpaceRunner } from '../membership/nospace-runner';
import { faultTolerance, quorumOf } from '../membership/quorum';
import type { Member, MemberStatus } from '../proto/types';
import { canonicalUrl } from '../proto/urls';
import { lagOf, leaderIndex } from './lag';
import type { AlarmHealth, ClusterHealth, HealthStatus, MemberHealth, ObservedFacts, QuorumHealth, StatusProbe } from './types';

export { canonicalUrl } from '../proto/urls';

/** Classifies one observation (docs/api.md §4 table). */
export function classify(facts: ObservedFacts): ClusterHealth {
  const errors: string[] = [];
  if (facts.memberListError !== undefined) errors.push(`member list: ${facts.memberListError}`);
  if (facts.alarmsError !== undefined) errors.push(`alarm list: ${facts.alarmsError}`);
  if (facts.operationsError !== undefined) errors.push(`operation records: ${facts.operationsError}`);
  const answered = facts.probes.filter((p): p is StatusProbe & { status: MemberStatus } => p.status !== undefined);
  const optional = {
    ...(facts.operations === undefined ? {} : { operations: facts.operations }),
    ...(facts.maintenance === undefined ? {} : { maintenance: facts.maintenance }),
  };

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
      // etcd answers no Status while it defragments: say so, when a run of the agents is doing it.
      const defrag = defragmentingNow(m, facts);
      if (defrag !== undefined) memberErrors.push(defrag);
    } else {
      // etcd's own words (an alarm, "no leader"): shown as they are and never parsed, but a member
      // that reports any is not healthy.
      memberErrors.push(...answer.errors);
      if (answer.errors.length > 0) troubled = true;
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
  const alarms = collectAlarms(facts.alarms ?? [], list.members);
  if (alarms.some((a) => a.alarm === 'NOSPACE')) errors.push(noSpaceHint(list.members, facts.maintenance));

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
 * Adds `expected` (docs/api.md §4 `?expected=`): names expected but not members, and started
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
): Pick<MemberHealth, 'raftTerm' | 'raftIndex' | 'raftAppliedIndex' | 'dbSizeBytes' | 'dbSizeInUseBytes' | 'latencyMs'> {
  return {
    raftTerm: status?.raftTerm ?? null,
    raftIndex: status?.raftIndex ?? null,
    raftAppliedIndex: status?.raftAppliedIndex ?? null,
    dbSizeBytes: status?.dbSizeBytes ?? null,
    dbSizeInUseBytes: status?.dbSizeInUseBytes ?? null,
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
  const probe = probeOf(member, probes);
  if (probe === undefined) return `not asked in this observation (${url})`;
  if (probe.status !== undefined) return `${url} answered as member ${probe.status.memberId}`;
  return `${url}: ${probe.error ?? 'no answer'}`;
}

/** `member`'s Status probe in one observation: the one sent to its first client URL, if it was asked. */
export function probeOf(member: Pick<Member, 'clientURLs'>, probes: StatusProbe[]): StatusProbe | undefined {
  const url = member.clientURLs[0];
  return url === undefined ? undefined : probes.find((p) => sameUrl(p.url, url));
}

function leaderView(status: MemberStatus, leaderId: string | undefined): string | undefined {
  if (leaderId === undefined || status.leaderId === leaderId) return undefined;
  const sees = status.leaderId === '0' ? 'no leader' : `leader ${status.leaderId}`;
  return `sees ${sees}, not the leader ${leaderId} a quorum agrees on`;
}

/**
 * The alarm list (the Alarm RPC), each alarm once, with its member's name. Never read from the
 * members' Status `errors`: their wording is etcd's own and changed in 3.7 (protobuf-go's text
 * format, which its authors say may change); they are shown as each member's errors, as they are.
 */
function collectAlarms(listed: Alarm[], members: Member[]): AlarmHealth[] {
  const seen = new Map<string, AlarmHealth>();
  for (const { memberId, alarm } of listed) {
    const key = `${memberId}/${alarm}`;
    if (alarm === 'NONE' || alarm === '0' || seen.has(key)) continue;
    seen.set(key, { memberId, name: members.find((m) => m.id === memberId)?.name ?? '', alarm });
  }
  return [...seen.values()];
}

/**
 * What `/v1/health` says while NOSPACE is raised: that etcd takes only reads and deletes, and what
 * clears it (POST /v1/maintenance/defragment, run by one agent while the lock cannot be written).
 */
function noSpaceHint(members: Member[], running: ObservedFacts['maintenance']): string {
  if (running !== undefined) return `NOSPACE: etcd takes only reads and deletes; this agent is clearing it (${running.step})`;
  const runner = noSpaceRunner(members);
  const who =
    runner === undefined
      ? ''
      : ` to the agent of ${runner.name} (while the alarm is raised, the agent of the started voter with the lowest id runs it)`;
  return `NOSPACE: etcd takes only reads and deletes; POST /v1/maintenance/defragment${who} compacts, defragments every member one at a time and disarms it`;
}

/** Why `member` says nothing, when a defragmentation of the agents is on it (this agent's run, or another's operation record). */
function defragmentingNow(member: Member, facts: ObservedFacts): string | undefined {
  if (facts.maintenance?.defragmenting?.id === member.id) return `being defragmented by this agent (run ${facts.maintenance.runId})`;
  const op = (facts.operations ?? []).find((o) => o.action === 'defragment' && o.member.name !== '' && o.member.name === member.name);
  return op === undefined ? undefined : `being defragmented by the agent of ${op.agent} (operation ${op.id}: ${op.step})`;
}

function sameUrl(a: string, b: string): boolean {
  return canonicalUrl(a) === canonicalUrl(b);
}
