/**
 * The maintenance service: the one door of POST /v1/maintenance/defragment and of the schedule.
 * One run at a time in this agent (a call while one runs joins it, whatever its options); a call
 * waits for the run at most its deadline and answers 202 `in-progress` meanwhile, the run going on
 * (defragment.ts says why a run outlives a call). Another agent's run holding the lock is answered
 * `in-progress` too, naming it. Under NOSPACE a caller's call to an agent that is not the runner is
 * handed on to the runner's agent, whose answer it is (hand-on.ts). Every answer is counted like an
 * action's (`etcd_agent_actions_total{action="defragment"}`).
 *
 * It also keeps what runs need between them: the revision history (a retention given as a duration),
 * and each member's backend quota for `etcd_agent_member_db_quota_bytes`, read again at a scrape at
 * most every 5 minutes.
 */
import type { Config } from '../config/config';
import { Deadline, settledWithin } from '../lib/deadline';
import type { EtcdCluster } from '../etcd/cluster-client';
import { shuttingDownError, toAgentError } from '../etcd/errors';
import type { MembershipLock } from '../etcd/lock';
import type { MemberMetrics } from '../etcd/member-metrics';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import type { DefragmentResult, MaintenanceView } from '../proto/maintenance';
import type { DefragmentRequest } from '../proto/requests';
import { AgentError } from '../proto/errors';
import type { Member, MemberStatus, OperationRecord } from '../proto/types';
import { DEFRAG_METRICS_TIMEOUT_MS, QUOTA_REFRESH_MS } from '../config/timings';
import { DefragmentRun, NotTheRunner, RunningElsewhere, type RunOptions } from './defragment';
import { handOn, type HandOnCall } from './hand-on';
import { RevisionHistory } from './revision-history';

/** What the service is built from. */
export interface MaintenanceServiceDeps {
  cluster: EtcdCluster;
  config: Config;
  logger: Logger;
  metrics: Metrics;
  lock: MembershipLock;
}

/** Who asked, carried into the run's log lines. */
export interface MaintenanceContext {
  requestId?: string;
}

/** A call's answer: this agent's result, or under NOSPACE the runner agent's answer, status and body as they came. */
export type CallAnswer = { kind: 'result'; result: DefragmentResult } | { kind: 'handed-on'; status: number; text: string };

/** How long `close` waits for a run to reach its next step. */
const CLOSE_WAIT_MS = 1000;

/** Defragmentation runs, one at a time in this agent. */
export class MaintenanceService {
  /** When each revision was current, from the Status answers this agent gets (see revision-history.ts). */
  readonly history = new RevisionHistory();
  private current?: DefragmentRun;
  private quotaReadAt = 0;
  private closed = false;
  private readonly stopScrapes: () => void;

  constructor(private readonly deps: MaintenanceServiceDeps) {
    this.stopScrapes = deps.metrics.onScrape(async () => this.refreshQuotas());
  }

  /** Takes in a Status answer (the cluster client's status listener): its revision, for retentions given as durations. */
  sawStatus(status: MemberStatus): void {
    this.history.add(Date.now(), status.revision);
  }

  /**
   * Starts a run (or joins the one in flight) and answers within the call's deadline: the run's end,
   * or `in-progress` with where it is. `untilDone` waits for the end instead (the schedule).
   */
  async defragment(req: DefragmentRequest, context: MaintenanceContext = {}, untilDone = false): Promise<DefragmentResult> {
    const answer = await this.answer(req, context, untilDone);
    if (answer.kind !== 'result') throw new Error('a defragmentation without a hand-on answered as handed on');
    return answer.result;
  }

  /**
   * A caller's POST /v1/maintenance/defragment: as `defragment`, except that under NOSPACE, on an agent
   * other than the runner, the call is handed on to the runner's agent and its answer is this one
   * (hand-on.ts); when it cannot be, the answer is the `busy` refusal, saying why in `details.handOn`.
   */
  call(req: DefragmentRequest, context: MaintenanceContext & HandOnCall): Promise<CallAnswer> {
    return this.answer(req, context, false, context);
  }

  private async answer(req: DefragmentRequest, context: MaintenanceContext, untilDone: boolean, call?: HandOnCall): Promise<CallAnswer> {
    const started = performance.now();
    const { metrics } = this.deps;
    const observe = (outcome: string): void => {
      metrics.actionsTotal.inc({ action: 'defragment', outcome });
      metrics.actionDuration.observe({ action: 'defragment' }, (performance.now() - started) / 1000);
    };
    const deadline = Deadline.in((req.timeoutSeconds ?? this.deps.config.timeoutSeconds) * 1000);
    try {
      if (this.closed) throw shuttingDownError();
      const run = this.current ?? this.start(req, context);
      const result = untilDone ? await run.result : await this.within(run, deadline);
      observe(result.outcome);
      return { kind: 'result', result };
    } catch (err) {
      if (err instanceof RunningElsewhere) {
        observe('in-progress');
        return { kind: 'result', result: elsewhere(err.record, started) };
      }
      if (err instanceof NotTheRunner && call !== undefined) {
        const handed = await handOn(err, req, { ...call, requestId: context.requestId }, deadline, this.deps);
        if (handed.kind === 'relay') {
          observe(handed.outcome);
          return { kind: 'handed-on', status: handed.status, text: handed.text };
        }
        observe('busy');
        throw new AgentError('busy', `${err.message.trimEnd().replace(/\.?$/, '.')} It was not handed on: ${handed.why}`, {
          details: { ...err.details, handOn: handed.why },
        });
      }
      observe(toAgentError(err).code);
      throw err;
    }
  }

  /** The run in flight in this agent, as `/v1/health` shows it. */
  view(): MaintenanceView | undefined {
    return this.current?.view();
  }

  /** Stops the run in flight at its next step (a Defragment in flight goes on in etcd) and the quota reads. */
  async close(): Promise<void> {
    this.closed = true;
    this.stopScrapes();
    const run = this.current;
    if (run === undefined) return;
    run.stop();
    await settledWithin(run.result, CLOSE_WAIT_MS);
  }

  private start(req: DefragmentRequest, context: MaintenanceContext): DefragmentRun {
    const { config } = this.deps;
    const retention = req.compact === false ? undefined : (req.compact ?? config.defragCompactRetain);
    const options: RunOptions = {
      minFragmentation: req.minFragmentation ?? config.defragMinFragmentation,
      minDbSizeBytes: req.minDbSizeBytes ?? config.defragMinDbSizeBytes,
      force: req.force === true,
      quotaMargin: config.defragQuotaMargin,
      ...(retention === undefined ? {} : { retention }),
    };
    const run = new DefragmentRun(
      { ...this.deps, history: this.history, onMetrics: (member, metrics) => this.sawQuota(member, metrics) },
      options,
      context.requestId,
    );
    this.current = run;
    this.deps.logger.info('defragmentation run started', { run: run.id, options, requestId: context.requestId });
    const clear = (): void => {
      if (this.current === run) this.current = undefined;
    };
    run.result.then(
      (result) => {
        clear();
        this.deps.logger.info('defragmentation run ended', {
          run: run.id,
          outcome: result.outcome,
          members: result.members.length,
          durationMs: result.durationMs,
        });
      },
      (err: unknown) => {
        clear();
        if (!(err instanceof RunningElsewhere))
          this.deps.logger.warn('defragmentation run stopped', { run: run.id, error: toAgentError(err).message, step: run.step });
      },
    );
    return run;
  }

  /** The run's result if it ends before `deadline`, else where it is now. */
  private async within(run: DefragmentRun, deadline: Deadline): Promise<DefragmentResult> {
    let timer: NodeJS.Timeout | undefined;
    const timeUp = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), deadline.remainingMs())));
    try {
      return (await Promise.race([run.result, timeUp])) ?? run.snapshot();
    } finally {
      clearTimeout(timer);
    }
  }

  private sawQuota(member: Member, metrics: MemberMetrics): void {
    const name = member.name || member.id;
    if (metrics.quotaBytes === undefined) this.deps.metrics.memberDbQuota.remove({ member: name });
    else this.deps.metrics.memberDbQuota.set({ member: name }, metrics.quotaBytes);
  }

  /** At a scrape, at most every 5 minutes: each member's quota, read in the background (the scrape does not wait). */
  private refreshQuotas(): void {
    if (this.closed || Date.now() - this.quotaReadAt < QUOTA_REFRESH_MS) return;
    this.quotaReadAt = Date.now();
    const { cluster } = this.deps;
    void (async () => {
      const list = await cluster.listMembers(Deadline.in(DEFRAG_METRICS_TIMEOUT_MS));
      await Promise.all(
        list.members
          .filter((m) => m.clientURLs.length > 0)
          .map(async (m) => {
            try {
              this.sawQuota(m, await cluster.memberMetrics(m.clientURLs[0], DEFRAG_METRICS_TIMEOUT_MS));
            } catch {
              // A member that does not answer now keeps the quota it last showed.
            }
          }),
      );
    })().catch((err: unknown) => {
      // Read again at the next scrape rather than in 5 minutes.
      this.quotaReadAt = 0;
      this.deps.logger.debug("could not read the members' quotas", { error: toAgentError(err).message });
    });
  }
}

/** The answer when another agent's defragmentation holds the lock: in progress there. */
function elsewhere(record: OperationRecord, started: number): DefragmentResult {
  return {
    action: 'defragment',
    outcome: 'in-progress',
    complete: false,
    run: { id: record.id, agent: record.agent, startedAt: record.startedAt, mode: 'lock', step: record.step },
    compaction: null,
    members: [],
    skipped: [],
    leaderTransferred: false,
    alarm: { noSpace: false, disarmed: false },
    durationMs: Math.round(performance.now() - started),
  };
}
