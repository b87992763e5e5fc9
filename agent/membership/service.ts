/**
 * The membership service: the one door through which the HTTP routes (and the
 * kbagent route) change cluster membership. Each call gets a deadline, shares
 * its execution with identical calls in flight, and is counted and timed.
 */
import { Deadline, timeoutError } from '../lib/deadline';
import { toAgentError } from '../etcd/errors';
import { MembershipLock } from '../etcd/lock';
import type { JoinRequest, LeaveRequest, PromoteRequest, TransferRequest } from '../proto/requests';
import type { ActionName, ActionResult, ClusterSummary, Member, OperationRecord } from '../proto/types';
import { AUTO_PROMOTE_INTERVAL_MS, AutoPromoter } from './auto-promote';
import { join } from './join';
import { leave } from './leave';
import { summarizeCluster, wantedMember } from './match';
import { promote } from './promote';
import { QuorumGate } from './quorum-gate';
import { isNoQuorum } from './quorum-verdict';
import { ActionRun, type CallContext, type MembershipDeps, type MembershipServiceDeps } from './run';
import { requestKey, SingleFlight } from './single-flight';
import { transfer } from './transfer';

export type { MembershipServiceDeps };

/** Deadline of one auto-promotion pass: short, so shutdown never waits on it for long. */
const AUTO_PROMOTE_TIMEOUT_MS = 5000;

/** Join, leave, promote, transfer and the two lists, as docs/api.md §4 describes them. */
export class MembershipService {
  private readonly deps: MembershipDeps;
  private readonly flights = new SingleFlight<ActionResult>();
  private autoPromoter?: AutoPromoter;

  constructor(deps: MembershipServiceDeps) {
    const lock = new MembershipLock(deps.cluster, {
      keyPrefix: deps.config.keyPrefix,
      agent: deps.config.memberName,
      logger: deps.logger,
    });
    this.deps = { ...deps, lock, gate: deps.gate ?? new QuorumGate({ cluster: deps.cluster, config: deps.config, logger: deps.logger }) };
  }

  /** The cluster's membership lock, which maintenance runs take too (agent/maintenance/). */
  get lock(): MembershipLock {
    return this.deps.lock;
  }

  /** Makes `req.name` a voting member (202 `added`/`in-progress`, 200 `promoted`/`already-member`). */
  join(req: JoinRequest, context?: CallContext): Promise<ActionResult> {
    return this.execute('memberJoin', req, req.timeoutSeconds, context, (run) => join(run, req));
  }

  /** Removes the member `req` names (200 `removed`/`already-absent`). */
  leave(req: LeaveRequest, context?: CallContext): Promise<ActionResult> {
    return this.execute('memberLeave', req, req.timeoutSeconds, context, (run) => leave(run, req));
  }

  /** Promotes a learner (200 `promoted`/`already-member`, 202 `in-progress`). */
  promote(req: PromoteRequest, context?: CallContext): Promise<ActionResult> {
    return this.execute('memberPromote', req, req.timeoutSeconds, context, (run) => promote(run, wantedMember(this.deps.config, req)));
  }

  /** Moves leadership (200 `transferred`/`already-leader`/`not-leader`). */
  transfer(req: TransferRequest, context?: CallContext): Promise<ActionResult> {
    return this.execute('leaderTransfer', req, req.timeoutSeconds, context, (run) => transfer(run, req));
  }

  /** The member list, read through a quorum, with its summary; `unavailable` at once without a quorum. */
  async listMembers(timeoutSeconds?: number): Promise<{ cluster: ClusterSummary; members: Member[] }> {
    const list = await this.deps.gate.through(this.deadline(timeoutSeconds), 'reading the member list', (d) =>
      this.deps.cluster.listMembers(d),
    );
    return { cluster: summarizeCluster(list.clusterId, list.members), members: list.members };
  }

  /** Membership changes in flight, cluster-wide (docs/api.md §4 GET /v1/operations); `unavailable` at once without a quorum. */
  listOperations(timeoutSeconds?: number): Promise<OperationRecord[]> {
    return this.deps.gate.through(this.deadline(timeoutSeconds), 'reading the operation records', (d) => this.deps.lock.listOperations(d));
  }

  /**
   * The operation records for a health observation, not gated: the observation bounds its own reads,
   * and is itself what the gate looks at first.
   */
  operationRecords(deadline: Deadline): Promise<OperationRecord[]> {
    return this.deps.lock.listOperations(deadline);
  }

  /**
   * Starts promoting this pod's own learner in the background (see auto-promote.ts); returns the
   * function that stops it.
   */
  startAutoPromotion(intervalMs = AUTO_PROMOTE_INTERVAL_MS): () => Promise<void> {
    if (this.autoPromoter === undefined) {
      this.autoPromoter = new AutoPromoter({
        cluster: this.deps.cluster,
        config: this.deps.config,
        logger: this.deps.logger,
        metrics: this.deps.metrics,
        intervalMs,
        promote: (memberId) =>
          this.execute(
            'memberPromote',
            { id: memberId, auto: true },
            AUTO_PROMOTE_TIMEOUT_MS / 1000,
            { requestId: 'auto-promote' },
            (run) => promote(run, { id: memberId, peerURLs: [] }),
          ),
      });
      this.autoPromoter.start();
    }
    const promoter = this.autoPromoter;
    return () => promoter.stop();
  }

  /** Stops the background loop and releases any lock still held. */
  async close(): Promise<void> {
    await this.autoPromoter?.stop();
    await this.deps.lock.releaseAll();
  }

  /**
   * Settles once the calls in flight now have answered. After the etcd client is closed that is
   * soon (their next etcd call fails as shutting down, which is never retried); a stop waits for it,
   * so that no retry of theirs outlives the agent.
   */
  settled(): Promise<void> {
    return this.flights.settled();
  }

  private deadline(timeoutSeconds?: number): Deadline {
    return Deadline.in((timeoutSeconds ?? this.deps.config.timeoutSeconds) * 1000);
  }

  /** Single-flight by (action, request), then one ActionRun; counts and times every answer. */
  private async execute(
    action: ActionName,
    request: object,
    timeoutSeconds: number | undefined,
    context: CallContext | undefined,
    body: (run: ActionRun) => Promise<ActionResult>,
  ): Promise<ActionResult> {
    const started = performance.now();
    const { metrics } = this.deps;
    const observe = (outcome: string): void => {
      metrics.actionsTotal.inc({ action, outcome });
      metrics.actionDuration.observe({ action }, (performance.now() - started) / 1000);
    };
    try {
      // Only the first of identical calls runs; the others share its answer, error included.
      const result = await this.flights.do(requestKey(action, request), async () => {
        const run = new ActionRun(this.deps, action, this.deadline(timeoutSeconds), context);
        try {
          return await body(run);
        } catch (err) {
          // An etcd call cut short by the call's own deadline is the contract's `timeout` (504,
          // with the step reached), not etcd being unavailable; a lost quorum stays what it is.
          const cutShort = toAgentError(err).code === 'unavailable' && run.deadline.expired() && !isNoQuorum(err);
          throw cutShort ? timeoutError(run.step) : err;
        }
      });
      observe(result.outcome);
      return result;
    } catch (err) {
      // Rethrown as is: the error middleware maps it again and logs an internal one with its own stack.
      observe(toAgentError(err).code);
      throw err;
    }
  }
}
