/**
 * The act of POST /v1/recovery: one function per step of the order (order.ts), each taking it to
 * the next step or stopping where the call's deadline ends it, and a dispatcher that runs the step
 * the order is at:
 *
 *   ordered  → hold etcd stopped through its start script                   → held
 *   held     → re-check the gates with etcd stopped; prepare's passes write
 *              etcd's flags and the one-shot `--force-new-cluster`            → started
 *   started  → lift the hold; once etcd leads, write the record into it       → done
 *              (a one-shot start that never took effect, lost-start.ts)       → ordered
 *   done     → the recovered cluster's record is the answer
 *
 * A refusal at the re-check calls the recovery off (the one-shot file, the hold and the order
 * dropped: etcd starts as it was) and throws.
 *
 * Invariants: etcd is started with `--force-new-cluster` only through a hold whose re-check found no
 * quorum, and at most once per hold (the start script renames the one-shot file before it starts
 * etcd); a step is kept in the order file only once its effect is done, so an agent that resumes the
 * order repeats at most the step it was in.
 */
import type { Config } from '../config/config';
import { RECOVERY_RECORD_ATTEMPT_MS, RECOVERY_RECORD_READ_MS } from '../config/timings';
import type { EtcdCluster } from '../etcd/cluster-client';
import { readRecoveryRecord, writeRecoveryRecord } from '../etcd/recovery-record';
import { crashPoint } from '../lib/crash-point';
import { Deadline } from '../lib/deadline';
import { pollUntil } from '../lib/poll';
import type { MembershipService } from '../membership/service';
import type { Logger } from '../observability/logger';
import type { EtcdStartControl } from '../prepare/etcd-control';
import type { PrepareOptions } from '../prepare/options';
import { preparePasses } from '../prepare/run';
import { AgentError } from '../proto/errors';
import type { RecoveryOrder, RecoveryRecord } from '../proto/recovery';
import { decideRecovery, type RecoveryDecision } from './decision';
import type { FactsReader } from './facts';
import { LostStartWatch } from './lost-start';
import { recordOf, type OrderFile, type OrderStep } from './order';

/** Pause between looks for the start script's `held`: the script writes its state every 0.2 s while it holds etcd. */
const HOLD_POLL_MS = 200;
/** Kept back from the deadline by the waits of `ordered` and `held`: time to keep the step reached and answer it. */
const STEP_RESERVE_MS = 200;
/** Pause between looks for the recovered etcd leading and taking the record: short, as `writableAfterMs` comes from it. */
const WRITABLE_POLL_MS = 100;
/** Kept back from the deadline by the wait of `started`: time to keep `done` and answer it. */
const WRITABLE_RESERVE_MS = 100;
/** Deadline of a look at whether this member's etcd leads yet: a local Status; a slow one only means "not yet". */
const LEADS_STATUS_MS = 500;

/** What the steps act with: this pod's etcd, through its start script, and the cluster it forms. */
export interface ActContext {
  config: Config;
  cluster: EtcdCluster;
  membership: MembershipService;
  logger: Logger;
  prepare: PrepareOptions;
  control: EtcdStartControl;
  orders: OrderFile;
  facts: FactsReader;
}

/** Where an act stopped: the step its order is at, and the recovery's record once done. */
export interface Reached {
  step: OrderStep;
  record?: RecoveryRecord;
}

/** What one step did: moved the order on (the dispatcher runs the step it is at now), or stopped the act. */
type StepResult = { next: RecoveryOrder } | { reached: Reached };

type Step = (ctx: ActContext, order: RecoveryOrder, deadline: Deadline) => Promise<StepResult>;

/** Each step's function; an order file of a step this agent does not know answers as `done` does. */
const STEPS: Readonly<Record<OrderStep, Step>> = { ordered: whenOrdered, held: whenHeld, started: whenStarted, done: whenDone };

/** Takes `order` from its step as far as `deadline` allows; a refusal at the re-check calls it off and throws. */
export async function carryOut(ctx: ActContext, order: RecoveryOrder, deadline: Deadline): Promise<Reached> {
  for (let at = order; ;) {
    const result = await (STEPS[at.step] ?? STEPS.done)(ctx, at, deadline);
    if ('reached' in result) return result.reached;
    at = result.next;
  }
}

/** ordered: ask the start script to stop etcd and hold it; `held` once the script says it does. */
async function whenOrdered(ctx: ActContext, order: RecoveryOrder, deadline: Deadline): Promise<StepResult> {
  const { control } = ctx;
  control.hold(order.id);
  crashPoint('recovery-hold-asked');
  const held = await pollUntil({ until: deadline.at - STEP_RESERVE_MS, pauseMs: HOLD_POLL_MS }, async () =>
    control.isHeld(order.id) ? true : undefined,
  );
  if (held === undefined) return { reached: { step: 'ordered' } };
  const next = ctx.orders.moveTo(order, 'held');
  ctx.logger.info('recovery: etcd stopped and held', { id: order.id });
  crashPoint('recovery-held');
  return { next };
}

/** held: the re-check; then prepare's passes write etcd's flags and the one-shot `--force-new-cluster`: `started`. */
async function whenHeld(ctx: ActContext, order: RecoveryOrder, deadline: Deadline): Promise<StepResult> {
  const { cluster, membership, logger, control, prepare } = ctx;
  const decision = await recheck(ctx, order);
  if (decision.kind !== 'recover') {
    callOff(ctx, order, decision.kind === 'refuse' ? decision.message : 'already recovered');
    if (decision.kind === 'already-recovered') return { reached: { step: 'done', record: decision.record } };
    throw new AgentError(decision.code, `called off at the re-check before acting: ${decision.message}`, { details: decision.details });
  }
  const outcome = await preparePasses(
    prepare,
    { cluster, membership, logger },
    { until: deadline.at - STEP_RESERVE_MS, sidecar: true, recovery: { clusterId: order.clusterId }, control },
  );
  if (!outcome.prepared) return { reached: { step: 'held' } };
  if (outcome.step.once === undefined) {
    // Prepare found the cluster answering after all: start as is, and call the recovery off.
    control.release();
    callOff(ctx, order, outcome.step.reason);
    throw new AgentError('unsafe', `called off: ${outcome.step.reason}`);
  }
  crashPoint('recovery-once-written');
  const next = ctx.orders.moveTo(order, 'started');
  crashPoint('recovery-started');
  return { next };
}

/**
 * The gates again, right before acting, with this member's etcd stopped (its log read from its WAL).
 * The minimum loss was checked when the order was given; what must hold now is that no quorum
 * answers, so the loss counts from the order's start (a restarted agent's own clock starts at zero).
 */
async function recheck(ctx: ActContext, order: RecoveryOrder): Promise<RecoveryDecision> {
  const facts = await ctx.facts.read(order);
  const ordered = order.quorumLostSince === null ? undefined : Date.parse(order.quorumLostSince);
  const lostSinceMs = ordered === undefined ? facts.lostSinceMs : Math.min(ordered, facts.lostSinceMs ?? ordered);
  return decideRecovery({ ...facts, lostSinceMs, request: { from: order.from, clusterId: order.clusterId, force: order.force } });
}

/**
 * started: lift the hold (also when the agent that kept this step died before lifting it), and once
 * this member's etcd leads, write the record into the cluster it formed: `done`. A one-shot start
 * that never took effect is ordered again, through a new hold and the same re-check.
 */
async function whenStarted(ctx: ActContext, order: RecoveryOrder, deadline: Deadline): Promise<StepResult> {
  const { control, logger } = ctx;
  if (control.heldBy() !== undefined) {
    control.release();
    logger.warn('recovery: etcd starts once with --force-new-cluster', { id: order.id });
  }
  crashPoint('recovery-released');
  const record = await untilWritable(ctx, order, deadline);
  if (record === undefined) return { reached: { step: 'started' } };
  if (record === 'lost') {
    logger.warn('recovery: the start with --force-new-cluster did not take effect; holding etcd to start it once more', { id: order.id });
    return { next: ctx.orders.moveTo(order, 'ordered') };
  }
  ctx.orders.moveTo(order, 'done');
  logger.warn('recovery done: the cluster takes writes again', { record });
  crashPoint('recovery-done');
  return { reached: { step: 'done', record } };
}

/** Looks until this member's etcd leads and keeps the record of `order`, or its one-shot start is seen lost; undefined at the deadline. */
async function untilWritable(ctx: ActContext, order: RecoveryOrder, deadline: Deadline): Promise<RecoveryRecord | 'lost' | undefined> {
  const { cluster, config, control, prepare, facts } = ctx;
  const lost = new LostStartWatch();
  return pollUntil({ until: deadline.at - WRITABLE_RESERVE_MS, pauseMs: WRITABLE_POLL_MS }, async () => {
    const status = await cluster.memberStatus(config.localEndpoint, LEADS_STATUS_MS).catch(() => undefined);
    if (status === undefined || status.leaderId !== status.memberId) {
      if (await lost.sees(control, (timeoutMs) => facts.peerMembers(prepare.self.peerURL, timeoutMs))) return 'lost' as const;
      return undefined;
    }
    return keepRecord(ctx, order);
  });
}

/** The record of `order` in the cluster: the one kept, else written now; undefined when neither answered (the next look tries again). */
async function keepRecord(ctx: ActContext, order: RecoveryOrder): Promise<RecoveryRecord | undefined> {
  const { cluster, config } = ctx;
  const kept = await readRecoveryRecord(cluster, config.keyPrefix, Deadline.in(RECOVERY_RECORD_ATTEMPT_MS)).catch(() => undefined);
  if (kept?.id === order.id) return kept;
  const record = recordOf(order, new Date().toISOString());
  try {
    await writeRecoveryRecord(cluster, config.keyPrefix, record, Deadline.in(RECOVERY_RECORD_ATTEMPT_MS));
  } catch {
    return undefined;
  }
  crashPoint('recovery-recorded');
  return record;
}

/** done: the recovered cluster's record is the answer (none when it cannot be read now). */
async function whenDone(ctx: ActContext, order: RecoveryOrder): Promise<StepResult> {
  const record = await readRecoveryRecord(ctx.cluster, ctx.config.keyPrefix, Deadline.in(RECOVERY_RECORD_READ_MS)).catch(() => undefined);
  return { reached: { step: order.step, ...(record === undefined ? {} : { record }) } };
}

/** Calls the recovery off: the one-shot file, the hold and the order dropped, so etcd starts as it was. */
function callOff(ctx: ActContext, order: RecoveryOrder, why: string): void {
  ctx.control.dropOnce();
  ctx.control.release();
  ctx.orders.remove();
  ctx.logger.warn('recovery called off; etcd starts as it was', { id: order.id, reason: why });
}
