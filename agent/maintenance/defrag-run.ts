/**
 * The record of one defragmentation run: everything the run knows, in one place, and what it shows
 * of itself (GET /v1/health's `maintenance`, the call's answer). The steps (defrag-right.ts,
 * defrag-look.ts, defrag-steps.ts, defrag-member.ts, defrag-end.ts) read and change it; nothing
 * else keeps run state.
 *
 * Invariant: nothing here is needed to continue the run elsewhere. The next run decides from what the
 * members say and reads what this one did from its record in etcd (defrag-end.ts); this record only
 * lets the run say what it did and avoid doing a member twice.
 */
import { randomUUID } from 'node:crypto';
import type { Config } from '../config/config';
import type { EtcdCluster } from '../etcd/cluster-client';
import type { HeldLock } from '../etcd/held-lock';
import type { MembershipLock } from '../etcd/lock';
import type { MemberMetrics } from '../etcd/member-metrics';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import type { DefragmentedMember, DefragmentResult, MaintenanceView, Retention, SkippedMember } from '../proto/maintenance';
import type { Member } from '../proto/types';
import type { CompactionMarks } from './compaction-settle';
import type { DefragOptions } from './defrag-decision';
import type { RevisionHistory } from './revision-history';
import { LocalSteps, type LockSteps } from './steps';
import type { Wait } from './wait-reason';

/** What a run is built from. */
export interface RunDeps {
  cluster: EtcdCluster;
  config: Pick<Config, 'memberName' | 'keyPrefix' | 'statusTimeoutMs'>;
  logger: Logger;
  metrics: Metrics;
  lock: MembershipLock;
  history: RevisionHistory;
  /** Each member's quota, as read from its own gauges (the service keeps them for etcd_agent_member_db_quota_bytes). */
  onMetrics?: (member: Member, metrics: MemberMetrics) => void;
}

/** The options of one run: the decision's thresholds, and the compaction's retention (none: no compaction). */
export interface RunOptions extends Omit<DefragOptions, 'compact'> {
  retention?: Retention;
}

/** One run's state. */
export interface DefragRun {
  readonly id: string;
  /** This agent's member name, as the run's answers and record name it. */
  readonly agent: string;
  readonly requestId?: string;
  readonly options: RunOptions;
  readonly startedAt: Date;
  /** `performance.now()` at the start: the run's duration is measured from here. */
  readonly began: number;
  finishedAt?: Date;

  // ── The right to act (defrag-right.ts) ──
  /** `lock`: under the membership lock; `nospace`: as the NOSPACE runner, without a lock. */
  mode: 'lock' | 'nospace';
  /** Where the steps are recorded: the lock's operation record, or the run alone. */
  recorder: LockSteps | LocalSteps;
  held?: HeldLock;

  // ── Where it is ──
  /** The step reached, as GET /v1/health and GET /v1/operations show it. */
  step: string;
  /** The member whose Defragment RPC is in flight. */
  defragmenting?: Member;
  /** The wait in progress and when it began (wait-reason.ts). */
  waiting?: Wait & { since: number };
  /** When the looks began finding the cluster unhealthy (defrag-look.ts). */
  unhealthySince?: number;
  /** The agent is stopping: the run ends at its next step. */
  stopping: boolean;

  // ── What it has done ──
  /** What the decision needs of it: compacted (and each voter's compaction marks), the members done (with their catch-up index), the leadership moves. */
  readonly progress: {
    compacted: boolean;
    settling: CompactionMarks;
    readonly done: Map<string, { catchUpIndex: number }>;
    leaderMoves: number;
  };
  /** Failed Defragment RPCs, by member id. */
  readonly failures: Map<string, number>;
  /** The earlier run this one continues (it stopped before its end), and the members that one did. */
  continues?: string;
  earlier: DefragmentedMember[];
  readonly members: DefragmentedMember[];
  compaction: DefragmentResult['compaction'];
  skipped: SkippedMember[];
  leaderTransferred: boolean;
  /** The member leadership was moved off, so its turn is logged and answered as the leader's. */
  movedFrom?: string;
  /** NOSPACE was seen raised during the run; this run disarmed it. */
  readonly alarm: { noSpace: boolean; disarmed: boolean };
}

/** A run just begun, recording its steps in itself until it has the right to act. */
export function newDefragRun(agent: string, options: RunOptions, requestId?: string): DefragRun {
  const run: Omit<DefragRun, 'recorder'> = {
    id: randomUUID(),
    agent,
    ...(requestId === undefined ? {} : { requestId }),
    options,
    startedAt: new Date(),
    began: performance.now(),
    mode: 'lock',
    step: 'starting',
    stopping: false,
    progress: { compacted: false, settling: new Map(), done: new Map(), leaderMoves: 0 },
    failures: new Map(),
    earlier: [],
    members: [],
    compaction: null,
    skipped: [],
    leaderTransferred: false,
    alarm: { noSpace: false, disarmed: false },
  };
  return Object.assign(run, { recorder: new LocalSteps(run) });
}

/** What `/v1/health` shows of the run. */
export function runView(run: DefragRun): MaintenanceView {
  return {
    action: 'defragment',
    runId: run.id,
    agent: run.agent,
    mode: run.mode,
    startedAt: run.startedAt.toISOString(),
    step: run.step,
    ...(run.defragmenting === undefined ? {} : { defragmenting: { id: run.defragmenting.id, name: run.defragmenting.name } }),
  };
}

/** The answer as it stands: `in-progress` until the run has ended. */
export function runSnapshot(run: DefragRun, outcome: DefragmentResult['outcome'] = 'in-progress'): DefragmentResult {
  return {
    action: 'defragment',
    outcome,
    complete: outcome !== 'in-progress',
    run: {
      id: run.id,
      agent: run.agent,
      startedAt: run.startedAt.toISOString(),
      ...(run.finishedAt === undefined ? {} : { finishedAt: run.finishedAt.toISOString() }),
      mode: run.mode,
      step: run.step,
      ...(run.continues === undefined ? {} : { continues: run.continues }),
    },
    compaction: run.compaction,
    members: [...run.earlier, ...run.members],
    skipped: run.skipped,
    leaderTransferred: run.leaderTransferred,
    alarm: { ...run.alarm },
    durationMs: Math.round(performance.now() - run.began),
  };
}
