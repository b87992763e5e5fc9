/**
 * One defragmentation run, in a straight line: take the right to act, then look at the members,
 * decide (defrag-decision.ts), do that one step, and look again, until the decision says done or
 * refuses. The run lives in the agent, not in a call: a call waits for it at most its deadline
 * (service.ts), because a big member's Defragment outlasts any call and must never be left running
 * while another starts.
 *
 * The right to act:
 * - normally the cluster's membership lock (etcd/lock.ts), with an operation record whose step names
 *   the member being defragmented (GET /v1/operations, /v1/health's `operations`). Membership
 *   changes wait meanwhile; another agent's defragmentation is answered "in progress there".
 * - while etcd's NOSPACE alarm is raised, no lock can be written (etcd refuses every put and lease
 *   grant). Then only the agent of the started voter with the lowest id runs (membership/
 *   nospace-runner.ts says why that is exclusive), and only once no lock taken before the alarm is
 *   held. When the alarm is gone (this run disarmed it) and work is left, the run takes the lock.
 *
 * Whatever holds the right, one more guard comes right before every Defragment RPC: every member's
 * own `etcd_disk_defrag_inflight` gauge is 0. It covers what no lock can: a Defragment that outlived
 * the run that sent it (its agent killed or stopped while etcd went on), or someone's etcdctl.
 *
 * Crash safety: nothing the run knows is needed to continue it. The next run decides from what the
 * members say (a member done is below the thresholds; one being defragmented is waited for), and the
 * record in etcd (etcd/maintenance-record.ts) lets it say which earlier run it continues and what that
 * one did.
 */
import { randomUUID } from 'node:crypto';
import type { Config } from '../config/config';
import { crashPointAfter } from '../lib/crash-point';
import { Deadline, delay } from '../lib/deadline';
import type { EtcdCluster } from '../etcd/cluster-client';
import { etcdRefusal, isNoSpace, shuttingDownError, toAgentError } from '../etcd/errors';
import type { HeldLock } from '../etcd/held-lock';
import type { MembershipLock } from '../etcd/lock';
import { readDefragRecord, writeDefragRecord } from '../etcd/maintenance-record';
import type { MemberMetrics } from '../etcd/member-metrics';
import { describeMember } from '../membership/match';
import { moveLeadership } from '../membership/move-leadership';
import { noSpaceRunner } from '../membership/nospace-runner';
import { probeMembers } from '../membership/probe';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { AgentError, isAgentError } from '../proto/errors';
import {
  describeRetention,
  type DbSizes,
  type DefragmentedMember,
  type DefragmentRecord,
  type DefragmentResult,
  type MaintenanceView,
  type Retention,
  type SkippedMember,
} from '../proto/maintenance';
import type { Member, MemberList, MemberStatus, OperationRecord } from '../proto/types';
import {
  DEFRAG_CATCH_UP_MAX_MS,
  DEFRAG_MEMBER_TIMEOUT_MS,
  DEFRAG_METRICS_TIMEOUT_MS,
  DEFRAG_MOVE_LEADER_MS,
  DEFRAG_STATUS_TIMEOUT_MS,
  DEFRAG_STEP_TIMEOUT_MS,
  DEFRAG_UNHEALTHY_CONFIRM_MS,
  DEFRAG_WAIT_POLL_MS,
  LOCK_MAX_WAIT_MS,
} from '../config/timings';
import { decideDefrag, skippedMembers, type DefragDecision, type DefragInput, type DefragOptions, type MetricsAnswer } from './defrag-decision';
import type { RevisionHistory } from './revision-history';
import { LocalSteps, LockSteps, RunMoveContext } from './steps';

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

/** Another agent's defragmentation holds the cluster lock: what this call asks for is under way there. */
export class RunningElsewhere extends Error {
  constructor(readonly record: OperationRecord) {
    super(`agent ${record.agent} is defragmenting the cluster (${record.step})`);
    this.name = 'RunningElsewhere';
  }
}

/** Failed Defragment RPCs of one member after which the run stops instead of trying it again. */
const MAX_DEFRAG_FAILURES = 2;
/** With ETCD_AGENT_CRASH_POINTS=defragment-sent-<n> (tests only): the agent dies this long after sending the n-th member's Defragment, while etcd runs it. */
const CRASH_IN_FLIGHT_MS = 50;

/** What one look at the cluster saw. */
interface Seen {
  list: MemberList;
  input: DefragInput;
}

/** One run; `result` settles when it ends. */
export class DefragmentRun {
  readonly id = randomUUID();
  readonly startedAt = new Date();
  mode: 'lock' | 'nospace' = 'lock';
  step = 'starting';
  /** The member whose Defragment RPC is in flight. */
  defragmenting?: Member;
  readonly result: Promise<DefragmentResult>;

  private readonly began = performance.now();
  private finishedAt?: Date;
  private readonly members: DefragmentedMember[] = [];
  private earlier: DefragmentedMember[] = [];
  private continues?: string;
  private compaction: DefragmentResult['compaction'] = null;
  private skipped: SkippedMember[] = [];
  private leaderTransferred = false;
  private movedFrom?: string;
  private noSpaceSeen = false;
  private disarmed = false;
  private compacted = false;
  private leaderMoves = 0;
  private readonly done = new Map<string, { catchUpIndex: number }>();
  private readonly failures = new Map<string, number>();
  private waiting?: { why: string; since: number };
  private unhealthySince?: number;
  private recorder: LockSteps | LocalSteps = new LocalSteps(this);
  private held?: HeldLock;
  private stopping = false;

  constructor(
    private readonly deps: RunDeps,
    private readonly options: RunOptions,
    readonly requestId?: string,
  ) {
    this.result = this.execute();
    // The service reads the result (and its failure); an unread failure must not crash the agent.
    this.result.catch(() => undefined);
  }

  /** Asks the run to stop at its next step (the agent is stopping); a Defragment in flight goes on in etcd. */
  stop(): void {
    this.stopping = true;
  }

  /** What `/v1/health` shows of the run. */
  view(): MaintenanceView {
    return {
      action: 'defragment',
      runId: this.id,
      agent: this.deps.config.memberName,
      mode: this.mode,
      startedAt: this.startedAt.toISOString(),
      step: this.step,
      ...(this.defragmenting === undefined ? {} : { defragmenting: { id: this.defragmenting.id, name: this.defragmenting.name } }),
    };
  }

  /** The answer as it stands: `in-progress` until the run has ended. */
  snapshot(outcome: DefragmentResult['outcome'] = 'in-progress'): DefragmentResult {
    return {
      action: 'defragment',
      outcome,
      complete: outcome !== 'in-progress',
      run: {
        id: this.id,
        agent: this.deps.config.memberName,
        startedAt: this.startedAt.toISOString(),
        ...(this.finishedAt === undefined ? {} : { finishedAt: this.finishedAt.toISOString() }),
        mode: this.mode,
        step: this.step,
        ...(this.continues === undefined ? {} : { continues: this.continues }),
      },
      compaction: this.compaction,
      members: [...this.earlier, ...this.members],
      skipped: this.skipped,
      leaderTransferred: this.leaderTransferred,
      alarm: { noSpace: this.noSpaceSeen, disarmed: this.disarmed },
      durationMs: Math.round(performance.now() - this.began),
    };
  }

  private async execute(): Promise<DefragmentResult> {
    const { metrics } = this.deps;
    metrics.defragRunning.set(1);
    try {
      await this.takeRight();
      await this.readEarlierRun();
      for (;;) {
        if (this.stopping) throw shuttingDownError();
        const seen = await this.look();
        let decision: DefragDecision;
        try {
          decision = decideDefrag(seen.input);
          this.unhealthySince = undefined;
        } catch (err) {
          if (!this.lookAgain(err)) throw err;
          await delay(DEFRAG_WAIT_POLL_MS * 2);
          continue;
        }
        if (decision.kind === 'done') return await this.finish(decision.outcome, seen);
        // The alarm is gone (this run disarmed it, or someone did) and work is left: from now on, under the lock.
        if (this.mode === 'nospace' && !seen.input.noSpace) await this.takeLock();
        await this.act(decision, seen);
      }
    } catch (err) {
      await this.writeRecord().catch(() => undefined);
      throw err;
    } finally {
      metrics.defragRunning.set(0);
      this.defragmenting = undefined;
      await this.held?.release();
    }
  }

  /**
   * True while an `unhealthy` refusal has lasted less than DEFRAG_UNHEALTHY_CONFIRM_MS: one slow Status
   * on a loaded machine is not a cluster that cannot spare a member, so the run looks again first.
   */
  private lookAgain(err: unknown): boolean {
    if (!isAgentError(err, 'unsafe') || err.details?.reason !== 'unhealthy') return false;
    const now = Date.now();
    this.unhealthySince ??= now;
    if (now - this.unhealthySince >= DEFRAG_UNHEALTHY_CONFIRM_MS) return false;
    this.step = `looking again: ${err.message}`;
    return true;
  }

  /** The lock, or under NOSPACE the runner rule; throws busy (or RunningElsewhere) when another has it. */
  private async takeRight(): Promise<void> {
    const { cluster, lock, config } = this.deps;
    this.step = 'reading the member list and the alarms';
    const deadline = Deadline.in(DEFRAG_STEP_TIMEOUT_MS);
    const [list, alarms] = await Promise.all([cluster.listMembers(deadline), cluster.alarms(deadline)]);
    if (!alarms.some((a) => a.alarm === 'NOSPACE')) {
      await this.takeLock();
      return;
    }
    this.noSpaceSeen = true;
    const runner = noSpaceRunner(list.members);
    if (runner?.name !== config.memberName) {
      const who = runner === undefined ? 'no started voter' : runner.name;
      throw new AgentError(
        'busy',
        `etcd's NOSPACE alarm is raised, so the cluster lock cannot be written; while it lasts only the agent of the started voter with the lowest id (${who}) defragments. ` +
          (runner === undefined ? '' : `Call that agent (kubectl exec ${runner.name} -c etcd-lifecycle-agent -- etcd-lifecycle-agent defragment)`),
        { details: { alarm: 'NOSPACE', reason: 'nospace-runner', runner: runner?.name } },
      );
    }
    const holder = await lock.holder(deadline);
    if (holder !== undefined) {
      if (holder.record?.action === 'defragment') throw new RunningElsewhere(holder.record);
      throw new AgentError('busy', `NOSPACE is raised and the cluster lock, taken before, is still held by agent ${holder.agent || 'unknown'}${holder.record === undefined ? '' : ` (${holder.record.action}, ${holder.record.step})`}`, {
        details: { alarm: 'NOSPACE', ...(holder.record === undefined ? {} : { operation: holder.record }) },
      });
    }
    this.mode = 'nospace';
    this.recorder = new LocalSteps(this);
    this.deps.logger.warn('defragmenting under NOSPACE without the cluster lock, as the runner of the lowest member id', { run: this.id, requestId: this.requestId });
  }

  private async takeLock(): Promise<void> {
    this.step = 'waiting for the membership lock';
    try {
      this.held = await this.deps.lock.acquire({ action: 'defragment', member: { name: '', peerURLs: [] } }, Deadline.in(LOCK_MAX_WAIT_MS + 2000));
    } catch (err) {
      const operation = isAgentError(err, 'busy') ? (err.details?.operation as OperationRecord | undefined) : undefined;
      if (operation?.action === 'defragment') throw new RunningElsewhere(operation);
      throw err;
    }
    this.mode = 'lock';
    this.recorder = new LockSteps(this.held, this);
    await this.recorder.setStep('taken the lock', Deadline.in(DEFRAG_STEP_TIMEOUT_MS));
  }

  /** An earlier run that stopped before its end (its agent died): this one continues it, and says what it did. */
  private async readEarlierRun(): Promise<void> {
    const record = await readDefragRecord(this.deps.cluster, this.deps.config.keyPrefix, Deadline.in(DEFRAG_STEP_TIMEOUT_MS)).catch(() => undefined);
    if (record === undefined || record.finishedAt !== undefined || record.id === this.id) return;
    this.continues = record.id;
    this.earlier = record.members.map((m) => ({ ...m, earlierRun: true }));
    this.deps.logger.info('continuing a defragmentation run that stopped before its end', { run: this.id, continues: record.id, by: record.agent, requestId: this.requestId });
  }

  /** The member list, every member's Status and own gauges, and the alarms. */
  private async look(): Promise<Seen> {
    const { cluster, config } = this.deps;
    const deadline = Deadline.in(DEFRAG_STEP_TIMEOUT_MS);
    const list = await cluster.listMembers(deadline);
    const [probe, metrics, alarms] = await Promise.all([
      probeMembers(cluster, list.members, Math.max(config.statusTimeoutMs, DEFRAG_STATUS_TIMEOUT_MS)),
      this.readMetrics(list.members),
      cluster.alarms(deadline),
    ]);
    const noSpace = alarms.some((a) => a.alarm === 'NOSPACE');
    if (noSpace) this.noSpaceSeen = true;
    return {
      list,
      input: {
        probe,
        metrics,
        noSpace,
        options: { ...this.options, compact: this.options.retention !== undefined },
        progress: { compacted: this.compacted, done: this.done, leaderMoves: this.leaderMoves },
      },
    };
  }

  /** Every started member's own gauges, in parallel. */
  private async readMetrics(members: Member[]): Promise<Map<string, MetricsAnswer>> {
    const answers = await Promise.all(
      members
        .filter((m) => m.clientURLs.length > 0)
        .map(async (m): Promise<[string, MetricsAnswer]> => {
          try {
            const answer = await this.deps.cluster.memberMetrics(m.clientURLs[0], DEFRAG_METRICS_TIMEOUT_MS);
            this.deps.onMetrics?.(m, answer);
            return [m.id, answer];
          } catch (err) {
            return [m.id, { error: toAgentError(err).message }];
          }
        }),
    );
    return new Map(answers);
  }

  private async act(decision: Exclude<DefragDecision, { kind: 'done' }>, seen: Seen): Promise<void> {
    if (decision.kind !== 'wait') this.waiting = undefined;
    switch (decision.kind) {
      case 'wait':
        return this.wait(decision.why, decision.member);
      case 'compact':
        return this.compact();
      case 'move-leader': {
        const { from, to } = decision;
        await this.recorder.setStep(`moving leadership from ${from.member.name} to ${to.member.name}, already defragmented, before defragmenting ${from.member.name}`, Deadline.in(DEFRAG_STEP_TIMEOUT_MS));
        const context = new RunMoveContext(this, Deadline.in(DEFRAG_MOVE_LEADER_MS), this.deps);
        this.leaderMoves++;
        await moveLeadership(context, this.recorder, from, to);
        this.leaderTransferred = true;
        this.movedFrom = from.member.id;
        return;
      }
      case 'defragment':
        return this.defragment(decision.target.member, decision.target.url, decision.target.status, decision.wasLeader, seen);
      case 'disarm':
        return this.disarm();
    }
  }

  /** One more look later; a wait that lasts too long ends the run. */
  private async wait(why: string, member: Member): Promise<void> {
    const now = Date.now();
    if (this.waiting?.why !== why) {
      this.waiting = { why, since: now };
      await this.recorder.setStep(`waiting: ${why}`, Deadline.in(DEFRAG_STEP_TIMEOUT_MS));
    }
    const limit = why.includes('being defragmented') ? DEFRAG_MEMBER_TIMEOUT_MS : DEFRAG_CATCH_UP_MAX_MS;
    if (now - this.waiting.since > limit) {
      throw new AgentError('unavailable', `waited ${Math.round((now - this.waiting.since) / 1000)} s: ${why}; call again`, { details: { member: member.name } });
    }
    await delay(DEFRAG_WAIT_POLL_MS);
  }

  /** Compacts to the current revision less the retention (or the revision current that long ago). */
  private async compact(): Promise<void> {
    const { cluster, history, logger } = this.deps;
    const retention = this.options.retention as Retention;
    const deadline = Deadline.in(DEFRAG_STEP_TIMEOUT_MS * 2);
    await this.recorder.setStep(`compacting the key history, keeping ${describeRetention(retention)}`, Deadline.in(DEFRAG_STEP_TIMEOUT_MS));
    let revision: number | undefined;
    let skipped: string | undefined;
    if ('retainRevisions' in retention) {
      const current = await cluster.currentRevision(deadline);
      revision = current - retention.retainRevisions;
      if (revision < 1) skipped = `the key history is at revision ${current}, within the ${retention.retainRevisions} revisions to keep`;
    } else {
      revision = history.revisionAt(Date.now() - retention.retainSeconds * 1000);
      if (revision === undefined) {
        const oldest = history.oldest();
        skipped = `this agent has seen the revisions only since ${oldest === undefined ? 'never' : new Date(oldest).toISOString()}, not ${retention.retainSeconds} s back`;
      }
    }
    if (skipped === undefined && revision !== undefined) {
      try {
        await cluster.compact(revision, deadline);
      } catch (err) {
        // Compacted to that revision or beyond already (an earlier run, etcd's auto-compaction): done.
        if (etcdRefusal(err) !== 'compacted') throw err;
      }
      this.compaction = { revision, retention };
      logger.info('compacted the key history', { run: this.id, revision, retention, requestId: this.requestId });
    } else {
      this.compaction = { skipped: skipped ?? 'no revision to compact to' };
      logger.info('compaction skipped', { run: this.id, reason: this.compaction.skipped, requestId: this.requestId });
    }
    this.compacted = true;
  }

  /** Defragments one member, after the last guard: no member is defragmenting right now. */
  private async defragment(member: Member, url: string | undefined, status: MemberStatus | undefined, wasLeader: boolean, seen: Seen): Promise<void> {
    const { cluster, metrics, logger } = this.deps;
    if (url === undefined || status === undefined) throw new AgentError('internal', `decided to defragment ${describeMember(member)}, which did not answer`);
    const order = this.members.length + 1;
    await this.recorder.setStep(`defragmenting ${member.name} (${order} of the members to do)`, Deadline.in(DEFRAG_STEP_TIMEOUT_MS), member);
    const others = await this.readMetrics(seen.list.members);
    if ([...others.values()].some((m) => !('error' in m) && m.defragmenting)) return; // the next look waits for it
    const before: DbSizes = { dbSizeBytes: status.dbSizeBytes, dbSizeInUseBytes: status.dbSizeInUseBytes };
    this.recorder.assertHeld();
    this.defragmenting = member;
    logger.info('defragmenting a member', { run: this.id, member: member.name, before, wasLeader: wasLeader || this.movedFrom === member.id, mode: this.mode, requestId: this.requestId });
    const started = performance.now();
    try {
      const answered = cluster.defragment(url, DEFRAG_MEMBER_TIMEOUT_MS);
      crashPointAfter(`defragment-sent-${order}`, CRASH_IN_FLIGHT_MS);
      await answered;
      metrics.defrags.inc({ member: member.name, result: 'ok' });
    } catch (err) {
      const error = toAgentError(err);
      metrics.defrags.inc({ member: member.name, result: error.code });
      const failures = (this.failures.get(member.id) ?? 0) + 1;
      this.failures.set(member.id, failures);
      logger.warn('a Defragment RPC failed', { run: this.id, member: member.name, error: error.message, failures, requestId: this.requestId });
      if (failures >= MAX_DEFRAG_FAILURES) throw error;
      return; // etcd may go on: the next look waits while the member's gauge says so, then decides again
    } finally {
      this.defragmenting = undefined;
    }
    const durationMs = Math.round(performance.now() - started);
    const after = await this.sizesAfter(member, url, before);
    const catchUpIndex = await this.leaderCommitted(seen, status.raftIndex);
    this.done.set(member.id, { catchUpIndex });
    const led = wasLeader || this.movedFrom === member.id;
    this.members.push({ id: member.id, name: member.name, before, after, durationMs, wasLeader: led });
    metrics.defragDbSize.set({ member: member.name, when: 'before' }, before.dbSizeBytes);
    metrics.defragDbSize.set({ member: member.name, when: 'after' }, after.dbSizeBytes);
    metrics.defragDbSizeInUse.set({ member: member.name, when: 'before' }, before.dbSizeInUseBytes);
    metrics.defragDbSizeInUse.set({ member: member.name, when: 'after' }, after.dbSizeInUseBytes);
    metrics.defragDuration.set({ member: member.name }, durationMs / 1000);
    logger.info('defragmented a member', { run: this.id, member: member.name, wasLeader: led, before, after, durationMs, mode: this.mode, requestId: this.requestId });
    await this.writeRecord().catch(() => undefined);
  }

  /** The member's sizes once it answers again (its Status waits until its defragmentation is over). */
  private async sizesAfter(member: Member, url: string, before: DbSizes): Promise<DbSizes> {
    for (let attempt = 0; attempt < 10; attempt++) {
      try {
        const s = await this.deps.cluster.memberStatus(url, 1000);
        return { dbSizeBytes: s.dbSizeBytes, dbSizeInUseBytes: s.dbSizeInUseBytes };
      } catch {
        await delay(200);
      }
    }
    this.deps.logger.warn('no status after a defragmentation; its sizes are unknown', { run: this.id, member: member.name });
    return before;
  }

  /** The leader's committed index now: what the member just defragmented must apply before the next one's turn. */
  private async leaderCommitted(seen: Seen, fallback: number): Promise<number> {
    const leader = seen.input.probe.leader;
    if (leader?.url === undefined) return fallback;
    try {
      return (await this.deps.cluster.memberStatus(leader.url, this.deps.config.statusTimeoutMs)).raftIndex;
    } catch {
      return leader.status?.raftIndex ?? fallback;
    }
  }

  /** Disarms the NOSPACE alarm of every member that has it raised, and nothing else. */
  private async disarm(): Promise<void> {
    const { cluster, logger } = this.deps;
    await this.recorder.setStep('disarming NOSPACE: every database is under its quota less the margin', Deadline.in(DEFRAG_STEP_TIMEOUT_MS));
    const deadline = Deadline.in(DEFRAG_STEP_TIMEOUT_MS);
    const raised = (await cluster.alarms(deadline)).filter((a) => a.alarm === 'NOSPACE');
    for (const alarm of raised) await cluster.disarmNoSpace(alarm.memberId, deadline);
    this.disarmed = true;
    logger.warn('disarmed NOSPACE', { run: this.id, members: raised.map((a) => a.memberId), requestId: this.requestId });
  }

  private async finish(outcome: 'defragmented' | 'nothing-to-do', seen: Seen): Promise<DefragmentResult> {
    this.skipped = skippedMembers(seen.input);
    this.step = 'done';
    const didSomething = this.members.length > 0 || this.disarmed || this.continues !== undefined || (this.compaction !== null && 'revision' in this.compaction);
    const result = this.snapshot(outcome === 'nothing-to-do' && didSomething ? 'defragmented' : outcome);
    this.finishedAt = new Date();
    result.run.finishedAt = this.finishedAt.toISOString();
    if (didSomething) {
      await this.writeRecord(result.outcome).catch((err: unknown) => {
        this.deps.logger.warn('could not record the defragmentation run in etcd', { run: this.id, error: toAgentError(err).message });
      });
    } else {
      const last = await readDefragRecord(this.deps.cluster, this.deps.config.keyPrefix, Deadline.in(DEFRAG_STEP_TIMEOUT_MS)).catch(() => undefined);
      if (last !== undefined) result.lastRun = last;
    }
    return result;
  }

  /** The run as recorded in etcd; `outcome` once it has ended. Refused (NOSPACE) writes are the caller's to ignore. */
  private async writeRecord(outcome?: DefragmentResult['outcome']): Promise<void> {
    if (this.members.length === 0 && outcome === undefined && this.continues === undefined) return;
    const record: DefragmentRecord = {
      id: this.id,
      agent: this.deps.config.memberName,
      startedAt: this.startedAt.toISOString(),
      ...(this.finishedAt === undefined || outcome === undefined ? {} : { finishedAt: this.finishedAt.toISOString(), outcome }),
      members: [...this.earlier, ...this.members],
      ...(this.compaction === null ? {} : { compaction: this.compaction }),
    };
    try {
      await writeDefragRecord(this.deps.cluster, this.deps.config.keyPrefix, record, Deadline.in(DEFRAG_STEP_TIMEOUT_MS));
    } catch (err) {
      if (!isNoSpace(err)) throw err;
    }
  }
}
