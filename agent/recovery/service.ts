/**
 * The recovery service: the plan (GET /v1/recovery), this agent's own member for the others' plans
 * (GET /v1/recovery/local), the act (POST /v1/recovery), and two loops: one that keeps looking at the
 * cluster once a second while the quorum is lost (so the loss clock has unbroken evidence), and one
 * that resumes an order a previous agent left and rejoins this pod's member after a recovery removed
 * it (rejoin.ts).
 *
 * The act orders a recovery (order.ts: the order, kept beside the flags file) and carries it out step
 * by step (steps.ts): hold this pod's etcd stopped through its start script, re-check the gates with
 * etcd stopped, let prepare's passes write its flags and the one-shot `--force-new-cluster`, lift the
 * hold, wait until the recovered cluster takes writes, and write the record of what was done into it.
 * A restarted agent finishes (or calls off) what its predecessor began, and a repeated call answers
 * the record.
 *
 * Invariants: one act runs at a time per agent, and the rejoin watch stays out of its way; a survivor
 * rejoins only when the recovered cluster's record names its member as removed.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../config/config';
import { RECOVERY_RECORD_READ_MS } from '../config/timings';
import type { EtcdCluster } from '../etcd/cluster-client';
import { readRecoveryRecord } from '../etcd/recovery-record';
import type { HealthObserver } from '../health/observer';
import { crashPoint } from '../lib/crash-point';
import { Deadline } from '../lib/deadline';
import type { MembershipService } from '../membership/service';
import type { Logger } from '../observability/logger';
import { EtcdStartControl } from '../prepare/etcd-control';
import type { PrepareOptions } from '../prepare/options';
import { AgentError } from '../proto/errors';
import type { LocalRecoveryState, RecoveryOrder, RecoveryPlan, RecoveryRecord } from '../proto/recovery';
import { decideRecovery, normalizeClusterId } from './decision';
import { FactsReader } from './facts';
import { newOrder, OrderFile } from './order';
import { buildPlan } from './plan';
import { rejoinIfRemoved } from './rejoin';
import { carryOut, type ActContext } from './steps';

/** Pause of the loss keeper: far inside the loss clock's longest gap (15 s), so a lost quorum's stretch stays unbroken. */
const KEEPER_PERIOD_MS = 1000;
/** Pause of the rejoin watch: a removed member rejoins within seconds, for a local Status and a record read per look. */
const REJOIN_PERIOD_MS = 2000;
/** Deadline of a resumed order's act (no call bounds it): the watch's next look resumes it again where it stopped. */
const RESUME_DEADLINE_MS = 30_000;

/** What the service needs; `prepare` is absent where the agent has no data directory and start script. */
export interface RecoveryDeps {
  config: Config;
  cluster: EtcdCluster;
  health: HealthObserver;
  membership: MembershipService;
  logger: Logger;
  prepare?: PrepareOptions;
}

/** POST /v1/recovery's success body (without the request id). */
export interface RecoveryAnswer {
  action: 'recovery';
  outcome: 'recovered' | 'already-recovered' | 'in-progress';
  complete: boolean;
  step?: RecoveryOrder['step'];
  record?: RecoveryRecord;
  /** From the call to the recovered cluster's first write (the record). */
  writableAfterMs?: number;
  durationMs: number;
}

/** The recovery routes' domain (see the module comment). */
export class RecoveryService {
  private readonly facts: FactsReader;
  /** What the act needs: present only with a data directory and start script. */
  private readonly act?: ActContext;
  /** The act in flight (a call's or a resumed one), chained so that one runs at a time. */
  private running: Promise<unknown> = Promise.resolve();
  /** How many acts are in flight or waiting: the rejoin watch stays out of their way. */
  private acting = 0;
  /** Aborted by close(): the loops stop, and a pause in progress ends at once (its timer with it). */
  private readonly stopping = new AbortController();
  private readonly loops: Array<Promise<void>> = [];

  constructor(private readonly deps: RecoveryDeps) {
    this.facts = new FactsReader(deps);
    const { prepare } = deps;
    if (prepare !== undefined) {
      const control = new EtcdStartControl(prepare.flagsFile);
      this.act = { ...deps, prepare, control, orders: new OrderFile(prepare.flagsFile), facts: this.facts };
    }
  }

  /** Starts the loss keeper, and (with a start script) the rejoin watch, which also resumes an interrupted order. */
  start(): void {
    this.loops.push(this.loop('quorum-loss look', KEEPER_PERIOD_MS, () => this.keepLooking()));
    const act = this.act;
    if (act !== undefined) this.loops.push(this.loop('rejoin watch', REJOIN_PERIOD_MS, () => this.watch(act)));
  }

  /** Stops the loops (a hold in force stays: the next agent finishes it). */
  async close(): Promise<void> {
    this.stopping.abort();
    await Promise.all(this.loops);
  }

  /** GET /v1/recovery/local. */
  async local(): Promise<LocalRecoveryState> {
    const { config, cluster, health } = this.deps;
    let etcd: LocalRecoveryState['etcd'] = null;
    let etcdError: string | null = null;
    try {
      const s = await cluster.memberStatus(config.localEndpoint, config.statusTimeoutMs);
      etcd = {
        memberId: s.memberId,
        clusterId: s.clusterId ?? null,
        raftTerm: s.raftTerm,
        committedIndex: s.raftIndex,
        appliedIndex: s.raftAppliedIndex,
        isLearner: s.isLearner,
      };
    } catch (err) {
      etcdError = err instanceof Error ? err.message : String(err);
    }
    const since = health.quorumLostSince();
    return {
      name: config.memberName,
      etcd,
      etcdError,
      dataDir: this.facts.readOwnDataDir(),
      quorumLostSince: since === undefined ? null : new Date(since).toISOString(),
      order: this.act?.orders.read() ?? null,
    };
  }

  /** GET /v1/recovery. */
  async plan(): Promise<RecoveryPlan> {
    const facts = await this.facts.read();
    return buildPlan({ ...facts, agentOf: (name) => this.facts.agentUrlOf(facts.list.find((m) => m.name === name)) });
  }

  /** POST /v1/recovery: one at a time per agent; a call meeting one in flight waits for it, then decides again. */
  async recover(request: { from: string; clusterId: string; force: boolean }, deadline: Deadline): Promise<RecoveryAnswer> {
    return this.serialized(() => this.recoverNow(request, deadline));
  }

  /** Runs `act` after the act in flight (one at a time per agent), counting it in `acting`. */
  private serialized<T>(act: () => Promise<T>): Promise<T> {
    this.acting++;
    const mine = this.running.catch(() => undefined).then(act);
    this.running = mine;
    return mine.finally(() => this.acting--);
  }

  /** Answers this agent's own finished order from its record, else orders a recovery if the gates allow one, and carries out the order. */
  private async recoverNow(request: { from: string; clusterId: string; force: boolean }, deadline: Deadline): Promise<RecoveryAnswer> {
    const started = Date.now();
    const { logger, config } = this.deps;
    const act = this.act;
    if (act === undefined) {
      throw new AgentError(
        'bad-request',
        `${config.memberName}'s agent cannot restart its etcd: it has no data directory and start script (ETCD_AGENT_DATA_DIR, ETCD_AGENT_PREPARE_FLAGS_FILE; kube-inject sets them)`,
      );
    }
    let order = act.orders.read();
    const same = order !== undefined && order.clusterId === normalizeClusterId(request.clusterId) && order.from === request.from;
    if (order !== undefined && same && order.step === 'done') {
      // This agent's own order, carried out: the recovered cluster's record of it is the answer. Read
      // straight through its quorum, not from a health observation, which may have begun before the
      // cluster took writes again and then still counts the removed voters, finding no quorum.
      const record = await readRecoveryRecord(
        this.deps.cluster,
        config.keyPrefix,
        Deadline.in(Math.min(RECOVERY_RECORD_READ_MS, deadline.remainingMs())),
      ).catch(() => undefined);
      if (record?.id === order.id)
        return { action: 'recovery', outcome: 'already-recovered', complete: true, record, durationMs: Date.now() - started };
    }
    if (order === undefined || !same || order.step === 'done') {
      const facts = await this.facts.read();
      const decision = decideRecovery({ ...facts, request });
      if (decision.kind === 'already-recovered') {
        return {
          action: 'recovery',
          outcome: 'already-recovered',
          complete: true,
          record: decision.record,
          durationMs: Date.now() - started,
        };
      }
      if (decision.kind === 'refuse') throw new AgentError(decision.code, decision.message, { details: decision.details });
      order = newOrder(decision, facts.lostSinceMs, facts.list);
      act.orders.write(order);
      logger.warn('recovery ordered: this member restarts once with --force-new-cluster', { order });
      crashPoint('recovery-ordered');
    }
    const reached = await carryOut(act, order, deadline);
    const done = reached.step === 'done';
    return {
      action: 'recovery',
      outcome: done ? 'recovered' : 'in-progress',
      complete: done,
      step: reached.step,
      ...(reached.record === undefined ? {} : { record: reached.record, writableAfterMs: Date.parse(reached.record.writableAt) - started }),
      durationMs: Date.now() - started,
    };
  }

  /** While the quorum is seen lost, look again once a second, so the loss clock's stretch stays unbroken. */
  private async keepLooking(): Promise<void> {
    if (this.deps.health.lastSawQuorumLoss()) await this.deps.health.cluster();
  }

  /** One look of the rejoin watch: finish (or call off) an order a previous agent left, else rejoin if removed (rejoin.ts). */
  private async watch(act: ActContext): Promise<void> {
    if (this.acting > 0) return;
    const order = act.orders.read();
    if (order !== undefined && order.step !== 'done') {
      await this.serialized(() => carryOut(act, order, Deadline.in(RESUME_DEADLINE_MS))).catch((err: unknown) =>
        this.deps.logger.warn('recovery resume failed', { error: err instanceof Error ? err.message : String(err) }),
      );
      return;
    }
    await rejoinIfRemoved(act);
  }

  private async loop(name: string, periodMs: number, body: () => Promise<void>): Promise<void> {
    let lastError: string | undefined;
    while (!this.stopping.signal.aborted) {
      try {
        await body();
        lastError = undefined;
      } catch (err) {
        // Once per kind of failure, not once a second: a loop that keeps failing the same way says so once.
        const error = err instanceof Error ? err.message : String(err);
        if (error !== lastError) this.deps.logger.warn(`recovery: the ${name} failed; it tries again`, { error });
        lastError = error;
      }
      // Rejected when close() aborts it: the loop then ends without waiting out its period.
      await sleep(periodMs, undefined, { signal: this.stopping.signal }).catch(() => undefined);
    }
  }
}
