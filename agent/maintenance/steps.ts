/**
 * Where a defragmentation run records its steps, and the execution a leadership move of the run
 * belongs to (membership/move-leadership.ts's MoveContext).
 *
 * Under the lock the step goes into the operation record in etcd (GET /v1/operations), and a write
 * etcd refuses because NOSPACE was raised mid-run is kept in memory instead: the run must go on and
 * clear it. Under NOSPACE no record can be written at all, so the step lives in the run alone
 * (GET /v1/health of this agent shows it).
 */
import type { Config } from '../config/config';
import type { Deadline } from '../lib/deadline';
import type { ChangeKind, EtcdCluster } from '../etcd/cluster-client';
import { isNoSpace } from '../etcd/errors';
import type { HeldLock, StepRecorder } from '../etcd/held-lock';
import type { MoveContext } from '../membership/move-leadership';
import type { LoggedMember } from '../membership/run';
import type { Logger } from '../observability/logger';
import { isAgentError } from '../proto/errors';

/** What the recorders and the move context tell about the run they serve. */
export interface StepSink {
  step: string;
  readonly id: string;
  readonly requestId?: string;
}

/** Steps under the membership lock: the operation record, best effort while NOSPACE refuses puts. */
export class LockSteps implements StepRecorder {
  constructor(
    readonly held: HeldLock,
    private readonly run: StepSink,
  ) {}

  assertHeld(): void {
    this.held.assertHeld();
  }

  /** Records `step` (naming `member` in the record when given). */
  async setStep(step: string, deadline: Deadline, member?: { name: string; peerURLs: string[] }): Promise<void> {
    this.run.step = step;
    if (member !== undefined) this.held.record.member = { name: member.name, peerURLs: [...member.peerURLs] };
    try {
      await this.held.setStep(step, deadline);
    } catch (err) {
      // NOSPACE raised since the lock was taken: the lock (a lease) still holds; only its record cannot change.
      if (!isNoSpace(err)) throw err;
    }
  }
}

/** Steps under NOSPACE: kept by the run alone (no right to lose: the NOSPACE runner rule is the right). */
export class LocalSteps implements StepRecorder {
  constructor(private readonly run: StepSink) {}

  assertHeld(): void {
    // The right to act under NOSPACE is the runner rule (membership/nospace-runner.ts), checked when the run began.
  }

  async setStep(step: string): Promise<void> {
    this.run.step = step;
  }
}

/** The execution a leadership move of a run belongs to: its deadline, its steps and its log lines. */
export class RunMoveContext implements MoveContext {
  constructor(
    private readonly run: StepSink,
    readonly deadline: Deadline,
    readonly deps: { cluster: Pick<EtcdCluster, 'moveLeader' | 'memberStatus'>; config: Pick<Config, 'statusTimeoutMs'>; logger: Logger },
  ) {}

  begin(step: string): void {
    this.run.step = step;
    this.deadline.check(step);
  }

  statusTimeoutMs(): number {
    return this.deadline.budget(this.deps.config.statusTimeoutMs);
  }

  async send<T>(held: StepRecorder, kind: ChangeKind, member: LoggedMember, rpc: () => Promise<T>): Promise<T> {
    held.assertHeld();
    const step = `sending ${kind} to ${member.name || member.id}`;
    this.begin(step);
    await held.setStep(step, this.deadline);
    const log = {
      what: kind,
      action: 'defragment',
      run: this.run.id,
      member: { id: member.id, name: member.name, peerURLs: member.peerURLs },
      requestId: this.run.requestId,
    };
    try {
      const result = await rpc();
      this.deps.logger.info('membership change', { ...log, outcome: 'done' });
      return result;
    } catch (err) {
      this.deps.logger.info('membership change', {
        ...log,
        outcome: isAgentError(err) ? err.code : 'failed',
        error: err instanceof Error ? err.message : String(err),
      });
      throw err;
    }
  }
}
