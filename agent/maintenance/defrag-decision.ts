/**
 * What a defragmentation run (POST /v1/maintenance/defragment) does next, decided from the member
 * list, every member's Status, every member's own gauges (member-metrics.ts), the alarms, the options
 * and what the run has done so far. Pure: one step at a time, so a run that stopped anywhere (its
 * agent killed) is continued by the next run deciding again from what the members say.
 *
 *   a member is defragmenting now (etcd_disk_defrag_inflight 1)    → wait: defragmenting (never a second one)
 *   a member this run defragmented has not applied its backlog yet  → wait: catching-up (wait-reason.ts)
 *   a voter does not answer, no leader, a voter lags                → throws unsafe, touching nothing
 *   compaction asked and not done yet                               → compact
 *   a voter not done yet has not finished this run's compaction,    → wait: compacting (compaction-settle.ts;
 *     or its in-use size does not show it yet (not under NOSPACE)        else a follower looks tidy, and the leader goes first)
 *   no voter left to do:
 *       NOSPACE raised, every voter under its quota less the margin → disarm NOSPACE
 *       NOSPACE raised, a voter still over it after its turn        → throws unavailable (the data fills the quota)
 *       otherwise                                                   → done: defragmented, or nothing-to-do
 *   next = a follower to do (by name), else the leader
 *   the cluster would not keep a quorum without it                  → throws unsafe, unless force
 *   next leads and another voter can take over                      → move leadership to a member already done
 *   otherwise                                                       → defragment next
 *
 * A voter is "to do" when this run has not defragmented it yet and its fragmentation,
 * (dbSize − dbSizeInUse) / dbSize as OpenShift's cluster-etcd-operator measures it, is at least
 * `minFragmentation` with a database of at least `minDbSizeBytes`; under NOSPACE also when its
 * database is over its quota less the margin (etcd 3.4 reports the space a compaction freed as in
 * use until the next write, which NOSPACE forbids). Learners are left alone: etcd serves a learner
 * only Status and serializable reads.
 */
import { VOTER_MAX_APPLY_LAG } from '../health/lag';
import type { MetricsAnswer } from '../etcd/member-metrics';
import { describeMember } from '../membership/match';
import type { ClusterProbe, MemberProbe } from '../membership/probe';
import { quorumOf } from '../membership/quorum';
import { AgentError } from '../proto/errors';
import type { SkippedMember } from '../proto/maintenance';
import type { Member } from '../proto/types';
import { unsettled, type CompactionMarks } from './compaction-settle';
import type { WaitReason } from './wait-reason';

/** The thresholds and switches a run decides with. */
export interface DefragOptions {
  /** Fragmentation (0–1] at or above which a member is defragmented. */
  minFragmentation: number;
  /** Databases smaller than this are left alone (unless NOSPACE needs them). */
  minDbSizeBytes: number;
  /** Defragment even when the cluster would not keep a quorum without the member (a one- or two-member cluster). */
  force: boolean;
  /** Fraction of the quota that must be free on every voter before NOSPACE is disarmed. */
  quotaMargin: number;
  /** A compaction comes first. */
  compact: boolean;
}

/** What the run has done so far, as the decision needs it. */
export interface DefragProgress {
  compacted: boolean;
  /** This run's compaction as each voter finishes it (compaction-settle.ts); empty when it made none. */
  settling: CompactionMarks;
  /** Members this run defragmented, by id: the leader's committed index when it was done, which it must apply before the next. */
  done: ReadonlyMap<string, { catchUpIndex: number }>;
  /** MoveLeader calls this run has made (bounded: leadership never moves more often than there are voters). */
  leaderMoves: number;
}

/** Everything one decision looks at. */
export interface DefragInput {
  probe: ClusterProbe;
  /** Each member's own gauges, by member id (members not asked are absent). */
  metrics: ReadonlyMap<string, MetricsAnswer>;
  /** NOSPACE is raised (the alarm list). */
  noSpace: boolean;
  options: DefragOptions;
  progress: DefragProgress;
}

/** The run's next step. */
export type DefragDecision =
  | { kind: 'wait'; member: Member; reason: WaitReason }
  | { kind: 'compact' }
  | { kind: 'disarm' }
  | { kind: 'move-leader'; from: MemberProbe; to: MemberProbe }
  | { kind: 'defragment'; target: MemberProbe; wasLeader: boolean }
  | { kind: 'done'; outcome: 'defragmented' | 'nothing-to-do' };

/** (dbSize − dbSizeInUse) / dbSize, 0 for an empty database. */
export function fragmentationOf(status: { dbSizeBytes: number; dbSizeInUseBytes: number }): number {
  if (status.dbSizeBytes <= 0) return 0;
  return Math.max(0, status.dbSizeBytes - status.dbSizeInUseBytes) / status.dbSizeBytes;
}

/** The database size at or above which a member is over its quota less the margin; undefined without a known quota. */
export function spaceLimit(metrics: MetricsAnswer | undefined, margin: number): number | undefined {
  if (metrics === undefined || 'error' in metrics || metrics.quotaBytes === undefined) return undefined;
  return Math.floor(metrics.quotaBytes * (1 - margin));
}

const pct = (x: number): string => `${Math.round(x * 1000) / 10} %`;
const mb = (bytes: number): string => `${Math.round(bytes / 10_000) / 100} MB`;

/** Decides the run's next step; see the module comment for the table. Throws `unsafe` or `unavailable` as it says. */
export function decideDefrag(input: DefragInput): DefragDecision {
  const { probe, metrics, options, progress } = input;
  const voters = probe.probes.filter((p) => !p.member.isLearner);

  // Never a second defragmentation beside one running (ours that outlived its call, an earlier agent's, etcdctl's).
  for (const p of probe.probes) {
    const m = metrics.get(p.member.id);
    if (m !== undefined && !('error' in m) && m.defragmenting) {
      return { kind: 'wait', member: p.member, reason: { kind: 'defragmenting' } };
    }
  }
  // A member just defragmented applies the entries it missed before the next member's turn.
  for (const p of voters) {
    const done = progress.done.get(p.member.id);
    if (done !== undefined && p.status !== undefined && p.status.raftAppliedIndex < done.catchUpIndex) {
      return {
        kind: 'wait',
        member: p.member,
        reason: { kind: 'catching-up', appliedIndex: p.status.raftAppliedIndex, catchUpIndex: done.catchUpIndex },
      };
    }
  }
  requireHealthy(probe, voters);

  if (options.compact && !progress.compacted) return { kind: 'compact' };
  // Under NOSPACE a voter over its limit is to do whatever its in-use size says, and no write may drive
  // the commits. A voter this run defragmented holds only live data: its Status is exact.
  const compacting = input.noSpace
    ? undefined
    : unsettled(
        voters.filter((p) => !progress.done.has(p.member.id)),
        progress.settling,
        metrics,
      );
  if (compacting !== undefined) return { kind: 'wait', ...compacting };

  const todo = voters.filter((p) => isToDo(p, input));
  if (todo.length === 0) {
    if (!input.noSpace) return { kind: 'done', outcome: progress.done.size > 0 ? 'defragmented' : 'nothing-to-do' };
    return disarmOrRefuse(voters, input);
  }

  const leaderId = probe.leader?.member.id;
  const followers = todo.filter((p) => p.member.id !== leaderId).sort((a, b) => a.member.name.localeCompare(b.member.name));
  const next = followers[0] ?? todo[0];
  const wasLeader = next.member.id === leaderId;

  const n = voters.length;
  const healthy = probe.healthyVoters;
  const required = quorumOf(n);
  if (healthy - 1 < required && !options.force) {
    const why =
      n === 1
        ? `${describeMember(next.member)} is the only member: the cluster serves nothing while it is defragmented`
        : `defragmenting ${describeMember(next.member)} leaves ${healthy - 1} serving voter${healthy - 1 === 1 ? '' : 's'} of ${n}; quorum needs ${required}`;
    throw new AgentError('unsafe', `${why}; force: true defragments it anyway`, {
      details: {
        reason: n === 1 ? 'single-member' : 'quorum',
        member: next.member.name,
        voters: n,
        healthyVoters: healthy,
        required,
        forceable: true,
        members: figures(voters),
      },
    });
  }

  if (wasLeader && n > 1) {
    if (progress.leaderMoves >= n) {
      throw new AgentError(
        'unavailable',
        `leadership was moved ${progress.leaderMoves} times in this run and ${describeMember(next.member)} leads again; call again`,
        {
          details: { members: figures(voters) },
        },
      );
    }
    const to = successor(voters, next, input);
    if (to !== undefined) return { kind: 'move-leader', from: next, to };
  }
  return { kind: 'defragment', target: next, wasLeader };
}

/** Why each voter and learner is left alone by a run that is done (or has nothing to do). */
export function skippedMembers(input: DefragInput): SkippedMember[] {
  const { probe, options, progress } = input;
  return probe.probes.flatMap((p): SkippedMember[] => {
    if (progress.done.has(p.member.id)) return [];
    const base = { id: p.member.id, name: p.member.name };
    if (p.member.isLearner)
      return [{ ...base, reason: 'a learner: etcd serves a learner only Status and serializable reads, so it is not defragmented' }];
    if (p.status === undefined) return [{ ...base, reason: `no status: ${p.error ?? 'no answer'}` }];
    const sizes = { dbSizeBytes: p.status.dbSizeBytes, dbSizeInUseBytes: p.status.dbSizeInUseBytes };
    const fragmentation = fragmentationOf(p.status);
    if (fragmentation < options.minFragmentation) {
      return [{ ...base, ...sizes, reason: `fragmentation ${pct(fragmentation)} is below ${pct(options.minFragmentation)}` }];
    }
    if (p.status.dbSizeBytes < options.minDbSizeBytes) {
      return [{ ...base, ...sizes, reason: `database ${mb(p.status.dbSizeBytes)} is below ${mb(options.minDbSizeBytes)}` }];
    }
    return [{ ...base, ...sizes, reason: 'not reached' }];
  });
}

function isToDo(p: MemberProbe, input: DefragInput): boolean {
  const { options, progress } = input;
  if (p.status === undefined || progress.done.has(p.member.id)) return false;
  const overThresholds = fragmentationOf(p.status) >= options.minFragmentation && p.status.dbSizeBytes >= options.minDbSizeBytes;
  if (overThresholds) return true;
  if (!input.noSpace) return false;
  const limit = spaceLimit(input.metrics.get(p.member.id), options.quotaMargin);
  // Without a known quota the member is done under NOSPACE too: the disarm step then refuses, saying why.
  return limit === undefined || p.status.dbSizeBytes >= limit;
}

/** Every voter answered its Status, names one leader a quorum agrees on, and none lags: else unsafe. */
function requireHealthy(probe: ClusterProbe, voters: MemberProbe[]): void {
  const problems: string[] = [];
  for (const p of voters) {
    if (p.status === undefined) problems.push(`${describeMember(p.member)} did not answer its status call (${p.error ?? 'no answer'})`);
  }
  const leader = probe.leader;
  if (leader === undefined) problems.push('no leader that a quorum of the voters names');
  else {
    for (const p of voters) {
      if (p.status !== undefined && p.status.leaderId !== leader.member.id)
        problems.push(`${describeMember(p.member)} sees leader ${p.status.leaderId}, not ${leader.member.id}`);
    }
    const committed = leader.status?.raftIndex;
    for (const p of voters) {
      if (p.status !== undefined && committed !== undefined && committed - p.status.raftAppliedIndex > VOTER_MAX_APPLY_LAG) {
        problems.push(`${describeMember(p.member)} lags: applied ${p.status.raftAppliedIndex}, the leader committed ${committed}`);
      }
    }
  }
  if (problems.length === 0) return;
  throw new AgentError('unsafe', `the cluster is not healthy, so no member is defragmented: ${problems.join('; ')}`, {
    details: {
      reason: 'unhealthy',
      voters: voters.length,
      healthyVoters: probe.healthyVoters,
      required: quorumOf(voters.length),
      problems,
      members: figures(voters),
    },
  });
}

/** NOSPACE raised and no voter left to do: disarm when every voter is under its limit, else say what fills it. */
function disarmOrRefuse(voters: MemberProbe[], input: DefragInput): DefragDecision {
  const over: string[] = [];
  for (const p of voters) {
    const m = input.metrics.get(p.member.id);
    const limit = spaceLimit(m, input.options.quotaMargin);
    if (limit === undefined) {
      const why = m === undefined ? 'not asked' : 'error' in m ? m.error : 'no quota reported';
      throw new AgentError(
        'unavailable',
        `the backend quota of ${describeMember(p.member)} is not known (${why}), so NOSPACE is not disarmed; call again`,
        {
          details: { reason: 'quota-unknown', member: p.member.name, alarm: 'NOSPACE', members: figures(voters) },
        },
      );
    }
    if (p.status !== undefined && p.status.dbSizeBytes >= limit) {
      over.push(
        `${describeMember(p.member)}: ${mb(p.status.dbSizeBytes)} (${mb(p.status.dbSizeInUseBytes)} in use) of a ${mb(limit)} limit`,
      );
    }
  }
  if (over.length === 0) return { kind: 'disarm' };
  throw new AgentError(
    'unavailable',
    `every member was compacted and defragmented as asked, but the data itself still fills the quota less ${pct(input.options.quotaMargin)}, ` +
      `so NOSPACE stays raised: ${over.join('; ')}. Delete keys (etcd allows deletes under NOSPACE), or compact keeping less history, or raise --quota-backend-bytes; then call again`,
    { details: { reason: 'data-fills-quota', alarm: 'NOSPACE', over, members: figures(voters) } },
  );
}

/** Where leadership goes before the leader is defragmented: a healthy voter this run did, else one that needs nothing; the most up to date. */
function successor(voters: MemberProbe[], leader: MemberProbe, input: DefragInput): MemberProbe | undefined {
  const candidates = voters.filter(
    (p) => p.member.id !== leader.member.id && p.status !== undefined && p.url !== undefined && !isToDo(p, input),
  );
  const rank = (p: MemberProbe): number => (input.progress.done.has(p.member.id) ? 0 : 1);
  candidates.sort(
    (a, b) =>
      rank(a) - rank(b) || (b.status?.raftAppliedIndex ?? 0) - (a.status?.raftAppliedIndex ?? 0) || a.member.id.localeCompare(b.member.id),
  );
  return candidates[0];
}

/** The figures an `unsafe` answer carries: each voter's sizes, fragmentation and whether it answered. */
function figures(voters: MemberProbe[]): Array<Record<string, unknown>> {
  return voters.map((p) => ({
    name: p.member.name,
    id: p.member.id,
    answered: p.status !== undefined,
    ...(p.status === undefined
      ? {}
      : {
          dbSizeBytes: p.status.dbSizeBytes,
          dbSizeInUseBytes: p.status.dbSizeInUseBytes,
          fragmentation: Math.round(fragmentationOf(p.status) * 1000) / 1000,
          leaderId: p.status.leaderId,
        }),
  }));
}
