/**
 * The recovery service: the plan (GET /v1/recovery), this agent's own member for the others' plans
 * (GET /v1/recovery/local), the act (POST /v1/recovery), and two loops: one that keeps looking at the
 * cluster once a second while the quorum is lost (so the loss clock has unbroken evidence), and one
 * that rejoins this pod's member after a recovery removed it.
 *
 * The act restarts this pod's etcd through its start script (prepare/etcd-control.ts): hold it
 * stopped, re-check the gates with etcd stopped, let prepare's passes write its flags and the
 * one-shot `--force-new-cluster`, lift the hold, wait until the recovered cluster takes writes, and
 * write the record of what was done into it. Every step is kept in an order file beside the flags
 * file, so a restarted agent finishes (or calls off) what its predecessor began, and a repeated call
 * answers the record.
 *
 * Invariants: etcd is started with `--force-new-cluster` only through a hold whose re-check found no
 * quorum, and at most once per hold (the start script renames the one-shot file before it starts
 * etcd); a survivor rejoins only when the recovered cluster's record names its member as removed.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../config/config';
import { crashPoint } from '../lib/crash-point';
import { getJson } from '../lib/http-request';
import { Deadline } from '../lib/deadline';
import type { EtcdCluster } from '../etcd/cluster-client';
import { fetchPeerMembers } from '../etcd/peer-members';
import { readRecoveryRecord, writeRecoveryRecord } from '../etcd/recovery-record';
import type { HealthObserver } from '../health/observer';
import type { MembershipService } from '../membership/service';
import type { Logger } from '../observability/logger';
import { pollUntil } from '../lib/poll';
import { readDataDir, writeFileAtomic } from '../etcd-data/data-dir';
import { EtcdStartControl } from '../prepare/etcd-control';
import type { PrepareOptions } from '../prepare/options';
import { preparePasses } from '../prepare/run';
import { readWalState } from '../etcd-data/wal-state';
import { AgentError } from '../proto/errors';
import type { LocalRecoveryState, MemberLogState, RecoveryOrder, RecoveryPlan, RecoveryRecord } from '../proto/recovery';
import type { Member, MemberStatus } from '../proto/types';
import { decideRecovery, normalizeClusterId, RecoveryFacts } from './decision';
import { buildPlan } from './plan';
import { mustRejoin } from './rejoin-rule';

/** Pause of the loss keeper and the rejoin watch. */
const KEEPER_PERIOD_MS = 1000;
const REJOIN_PERIOD_MS = 2000;
/** How long etcd must run from a plain start, still listing other members, before the one-shot start counts as lost. */
const LOST_START_MS = 10_000;
/** How long one agent's `GET /v1/recovery/local` may take. */
const LOCAL_ASK_MS = 1500;

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
  private readonly control?: EtcdStartControl;
  private readonly orderFile?: string;
  /** The act in flight (a call's or a resumed one), chained so that one runs at a time. */
  private running: Promise<unknown> = Promise.resolve();
  /** How many acts are in flight or waiting: the rejoin watch stays out of their way. */
  private acting = 0;
  /** Aborted by close(): the loops stop, and a pause in progress ends at once (its timer with it). */
  private readonly stopping = new AbortController();
  private readonly loops: Array<Promise<void>> = [];

  constructor(private readonly deps: RecoveryDeps) {
    if (deps.prepare !== undefined) {
      this.control = new EtcdStartControl(deps.prepare.flagsFile);
      this.orderFile = path.join(path.dirname(deps.prepare.flagsFile), 'recovery-order.json');
    }
  }

  /** Starts the loss keeper, and (with a start script) the rejoin watch, which also resumes an interrupted hold. */
  start(): void {
    this.loops.push(this.loop('quorum-loss look', KEEPER_PERIOD_MS, () => this.keepLooking()));
    if (this.control !== undefined) this.loops.push(this.loop('rejoin watch', REJOIN_PERIOD_MS, () => this.watch()));
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
      etcd = { memberId: s.memberId, clusterId: s.clusterId ?? null, raftTerm: s.raftTerm, committedIndex: s.raftIndex, appliedIndex: s.raftAppliedIndex, isLearner: s.isLearner };
    } catch (err) {
      etcdError = err instanceof Error ? err.message : String(err);
    }
    const since = health.quorumLostSince();
    return {
      name: config.memberName,
      etcd,
      etcdError,
      dataDir: this.readOwnDataDir(),
      quorumLostSince: since === undefined ? null : new Date(since).toISOString(),
      order: this.readOrder() ?? null,
    };
  }

  /** GET /v1/recovery. */
  async plan(): Promise<RecoveryPlan> {
    const facts = await this.facts();
    return buildPlan({ ...facts, agentOf: (name) => this.agentUrlOf(facts.list.find((m) => m.name === name)) });
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

  private async recoverNow(request: { from: string; clusterId: string; force: boolean }, deadline: Deadline): Promise<RecoveryAnswer> {
    const started = Date.now();
    const { logger, config } = this.deps;
    if (this.control === undefined || this.deps.prepare === undefined) {
      throw new AgentError('bad-request', `${config.memberName}'s agent cannot restart its etcd: it has no data directory and start script (ETCD_AGENT_DATA_DIR, ETCD_AGENT_PREPARE_FLAGS_FILE; kube-inject sets them)`);
    }
    let order = this.readOrder();
    const same = order !== undefined && order.clusterId === normalizeClusterId(request.clusterId) && order.from === request.from;
    if (order !== undefined && same && order.step === 'done') {
      // This agent's own order, carried out: the recovered cluster's record of it is the answer. Read
      // straight through its quorum, not from a health observation, which may have begun before the
      // cluster took writes again (then it still counts the removed voters: 1 of 5 answering).
      const record = await readRecoveryRecord(this.deps.cluster, config.keyPrefix, Deadline.in(Math.min(2000, deadline.remainingMs()))).catch(() => undefined);
      if (record?.id === order.id) return { action: 'recovery', outcome: 'already-recovered', complete: true, record, durationMs: Date.now() - started };
    }
    if (order === undefined || !same || order.step === 'done') {
      const facts = await this.facts();
      const decision = decideRecovery({ ...facts, request });
      if (decision.kind === 'already-recovered') {
        return { action: 'recovery', outcome: 'already-recovered', complete: true, record: decision.record, durationMs: Date.now() - started };
      }
      if (decision.kind === 'refuse') throw new AgentError(decision.code, decision.message, { details: decision.details });
      order = {
        id: randomUUID(),
        from: decision.from.name,
        fromId: decision.from.id,
        clusterId: decision.clusterId,
        force: decision.forced,
        orderedAt: new Date().toISOString(),
        quorumLostSince: facts.lostSinceMs === undefined ? null : new Date(facts.lostSinceMs).toISOString(),
        committedIndex: decision.from.committedIndex,
        raftTerm: decision.from.raftTerm,
        removed: decision.removed,
        members: facts.list,
        step: 'ordered',
      };
      this.writeOrder(order);
      logger.warn('recovery ordered: this member restarts once with --force-new-cluster', { order });
      crashPoint('recovery-ordered');
    }
    const reached = await this.carryOut(order, deadline);
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

  /** Takes `order` from its step as far as `deadline` allows; a refusal at the re-check calls it off and throws. */
  private async carryOut(order: RecoveryOrder, deadline: Deadline): Promise<{ step: RecoveryOrder['step']; record?: RecoveryRecord }> {
    const control = this.control as EtcdStartControl;
    const prepare = this.deps.prepare as PrepareOptions;
    const { logger, cluster, membership, config } = this.deps;
    if (order.step === 'ordered') {
      control.hold(order.id);
      crashPoint('recovery-hold-asked');
      const held = await pollUntil({ until: deadline.at - 200, pauseMs: 200 }, async () => (control.isHeld(order.id) ? true : undefined));
      if (held === undefined) return { step: 'ordered' };
      order = { ...order, step: 'held' };
      this.writeOrder(order);
      logger.info('recovery: etcd stopped and held', { id: order.id });
      crashPoint('recovery-held');
    }
    if (order.step === 'held') {
      // The re-check, right before acting, with this member's etcd stopped: its log is read from its WAL.
      const facts = await this.facts(order);
      // The minimum loss was checked when the order was given; what must hold right before acting is
      // that no quorum answers now (a restarted agent's own clock starts again at zero).
      const ordered = order.quorumLostSince === null ? undefined : Date.parse(order.quorumLostSince);
      const lostSinceMs = ordered === undefined ? facts.lostSinceMs : Math.min(ordered, facts.lostSinceMs ?? ordered);
      const decision = decideRecovery({ ...facts, lostSinceMs, request: { from: order.from, clusterId: order.clusterId, force: order.force } });
      if (decision.kind !== 'recover') {
        this.callOff(order, decision.kind === 'refuse' ? decision.message : 'already recovered');
        if (decision.kind === 'already-recovered') return { step: 'done', record: decision.record };
        throw new AgentError(decision.code, `called off at the re-check before acting: ${decision.message}`, { details: decision.details });
      }
      const outcome = await preparePasses(prepare, { cluster, membership, logger }, { until: deadline.at - 200, sidecar: true, recovery: { clusterId: order.clusterId }, control });
      if (!outcome.prepared) return { step: 'held' };
      if (outcome.step.once === undefined) {
        // Prepare found the cluster answering after all: start as is, and call the recovery off.
        control.release();
        this.callOff(order, outcome.step.reason);
        throw new AgentError('unsafe', `called off: ${outcome.step.reason}`);
      }
      crashPoint('recovery-once-written');
      order = { ...order, step: 'started' };
      this.writeOrder(order);
      crashPoint('recovery-started');
    }
    if (order.step === 'started') {
      // Lifted here, also when a predecessor died between recording this step and lifting the hold.
      if (control.heldBy() !== undefined) {
        control.release();
        logger.warn('recovery: etcd starts once with --force-new-cluster', { id: order.id });
      }
      crashPoint('recovery-released');
      const lost = new LostStartWatch();
      const record = await pollUntil({ until: deadline.at - 100, pauseMs: 100 }, async () => {
        const status = await cluster.memberStatus(config.localEndpoint, 500).catch(() => undefined);
        if (status === undefined || status.leaderId !== status.memberId) {
          if (await lost.sees(control, () => this.peerMembers(prepare.self.peerURL, 1000))) return 'lost' as const;
          return undefined;
        }
        const kept = await readRecoveryRecord(cluster, config.keyPrefix, Deadline.in(1500)).catch(() => undefined);
        if (kept?.id === order.id) return kept;
        const rec: RecoveryRecord = {
          id: order.id,
          clusterId: order.clusterId,
          from: { name: order.from, id: order.fromId, committedIndex: order.committedIndex, raftTerm: order.raftTerm },
          removed: order.removed,
          quorumLostSince: order.quorumLostSince,
          orderedAt: order.orderedAt,
          writableAt: new Date().toISOString(),
          force: order.force,
        };
        try {
          await writeRecoveryRecord(cluster, config.keyPrefix, rec, Deadline.in(1500));
        } catch {
          return undefined;
        }
        crashPoint('recovery-recorded');
        return rec;
      });
      if (record === undefined) return { step: 'started' };
      if (record === 'lost') {
        // etcd restarted without the one-shot flag having taken effect (its container stopped between
        // the rename and etcd's start): order it again, through a new hold and the same re-check.
        logger.warn('recovery: the start with --force-new-cluster did not take effect; holding etcd to start it once more', { id: order.id });
        order = { ...order, step: 'ordered' };
        this.writeOrder(order);
        return this.carryOut(order, deadline);
      }
      order = { ...order, step: 'done' };
      this.writeOrder(order);
      logger.warn('recovery done: the cluster takes writes again', { record });
      crashPoint('recovery-done');
      return { step: 'done', record };
    }
    const record = await readRecoveryRecord(cluster, config.keyPrefix, Deadline.in(2000)).catch(() => undefined);
    return { step: order.step, ...(record === undefined ? {} : { record }) };
  }

  private callOff(order: RecoveryOrder, why: string): void {
    this.control?.dropOnce();
    this.control?.release();
    if (this.orderFile !== undefined) fs.rmSync(this.orderFile, { force: true });
    this.deps.logger.warn('recovery called off; etcd starts as it was', { id: order.id, reason: why });
  }

  /** The facts of the decision and the plan: a fresh observation, each member's log, the record. */
  private async facts(order?: RecoveryOrder): Promise<Omit<RecoveryFacts, 'request'> & { list: Member[] }> {
    const { health, config, cluster } = this.deps;
    const answer = await health.cluster();
    // Without a quorum no member list can be read through one; every member serves its own to its
    // peers, so an agent that never read one (restarted during the loss) asks its own member's, then
    // those of the members its order names; and while its own etcd is held, the order's list is the
    // one the gates were checked against.
    const ownPeer = this.deps.prepare?.self.peerURL ?? config.localPeerUrl;
    const peers = [...new Set([...(ownPeer === undefined ? [] : [ownPeer]), ...(order?.members ?? []).flatMap((m) => m.peerURLs)])];
    const list =
      health.lastMembers() ??
      (peers.length === 0 ? undefined : await Promise.any(peers.map((u) => this.peerMembers(u, config.statusTimeoutMs * 2))).catch(() => undefined)) ??
      order?.members ??
      [];
    const q = answer.health.quorum;
    const counted = q !== null && q.voters > 0;
    const voterCount = list.filter((m) => !m.isLearner).length;
    const quorum = counted
      ? { voters: q.voters, answering: q.healthyVoters, required: q.required, hasQuorum: q.hasQuorum }
      : list.length === 0
        ? null
        : { voters: voterCount, answering: 0, required: Math.floor(voterCount / 2) + 1, hasQuorum: false };
    const members = await Promise.all(list.map((m) => this.logStateOf(m)));
    let record: RecoveryRecord | undefined;
    if (quorum?.hasQuorum === true) record = await readRecoveryRecord(cluster, config.keyPrefix, Deadline.in(2000)).catch(() => undefined);
    return {
      self: config.memberName,
      nowMs: Date.now(),
      lostSinceMs: health.quorumLostSince(),
      minLossSeconds: config.recoveryMinLossSeconds,
      quorum,
      members,
      ...(record === undefined ? {} : { record }),
      list,
    };
  }

  /** One member's log: its Status, else its data directory through its agent (this agent's own, read here). */
  private async logStateOf(m: Member): Promise<MemberLogState> {
    const { cluster, config } = this.deps;
    const errors: string[] = [];
    const base = { name: m.name, id: m.id, lastIndex: null };
    const own = m.name === config.memberName;
    const url = own ? config.localEndpoint : m.clientURLs[0];
    if (url !== undefined) {
      try {
        const s: MemberStatus = await cluster.memberStatus(url, config.statusTimeoutMs);
        if (s.memberId === m.id) {
          return { ...base, source: 'etcd', clusterId: s.clusterId ?? null, raftTerm: s.raftTerm, committedIndex: s.raftIndex, appliedIndex: s.raftAppliedIndex, isLearner: s.isLearner, errors };
        }
        errors.push(`${url} answers as member ${s.memberId}`);
      } catch (err) {
        errors.push(`etcd: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    const dir = own ? this.readOwnDataDir() : await this.askAgent(m).then(
      (l) => l.dataDir,
      (err: unknown) => ({ kind: 'unreadable' as const, reason: `agent: ${err instanceof Error ? err.message : String(err)}` }),
    );
    if (dir.kind === 'member' && dir.memberId === m.id) {
      return { ...base, source: 'data-dir', clusterId: dir.clusterId, raftTerm: dir.raftTerm, committedIndex: dir.committedIndex, appliedIndex: null, lastIndex: dir.lastIndex, isLearner: m.isLearner, errors };
    }
    errors.push(dir.kind === 'member' ? `its data directory holds member ${dir.memberId}` : `data directory: ${dir.kind}${'reason' in dir && dir.reason !== undefined ? ` (${dir.reason})` : ''}`);
    return { ...base, source: 'none', clusterId: null, raftTerm: null, committedIndex: null, appliedIndex: null, isLearner: m.isLearner, errors };
  }

  private readOwnDataDir(): LocalRecoveryState['dataDir'] {
    const dataDir = this.deps.prepare?.dataDir;
    if (dataDir === undefined) return { kind: 'not-configured' };
    try {
      const state = readDataDir(dataDir);
      if (state.kind !== 'member') return state.kind === 'empty' ? { kind: 'empty' } : { kind: 'unusable', reason: state.reason };
      const wal = readWalState(dataDir);
      if (wal === undefined) return { kind: 'unusable', reason: 'its newest WAL segment does not read as a WAL' };
      return { kind: 'member', memberId: wal.memberId, clusterId: wal.clusterId, raftTerm: wal.term, committedIndex: wal.commit, lastIndex: wal.lastIndex, segment: path.basename(wal.segment) };
    } catch (err) {
      return { kind: 'unreadable', reason: err instanceof Error ? err.message : String(err) };
    }
  }

  /** `http://<host of the member's peer URL>:<this agent's port>`, as prepare reaches its peers. */
  private agentUrlOf(m: Member | undefined): string | null {
    const peer = m?.peerURLs[0];
    if (peer === undefined) return null;
    const host = new URL(peer).host.replace(/:\d+$/, '');
    return `http://${host}:${this.deps.config.listen.port}`;
  }

  private async askAgent(m: Member): Promise<LocalRecoveryState> {
    const base = this.agentUrlOf(m);
    if (base === null) throw new Error('no peer URL to find its agent by');
    const body = (await getJson(`${base}/v1/recovery/local`, LOCAL_ASK_MS)) as LocalRecoveryState;
    if (body.name !== m.name) throw new Error(`${base} answers as ${String(body.name)}`);
    return body;
  }

  /** The member list a member's etcd serves its peers (`GET <peer URL>/members`), even without a quorum. */
  private peerMembers(peerURL: string, timeoutMs: number): Promise<Member[]> {
    const { config } = this.deps;
    return fetchPeerMembers(peerURL, timeoutMs, { caFile: config.etcdCaFile, certFile: config.etcdCertFile, keyFile: config.etcdKeyFile });
  }

  private readOrder(): RecoveryOrder | undefined {
    if (this.orderFile === undefined) return undefined;
    try {
      return JSON.parse(fs.readFileSync(this.orderFile, 'utf8')) as RecoveryOrder;
    } catch {
      return undefined;
    }
  }

  private writeOrder(order: RecoveryOrder): void {
    if (this.orderFile !== undefined) writeFileAtomic(this.orderFile, `${JSON.stringify(order)}\n`);
  }

  /** While the quorum is seen lost, look again once a second, so the loss clock's stretch stays unbroken. */
  private async keepLooking(): Promise<void> {
    if (this.deps.health.lastSawQuorumLoss()) await this.deps.health.cluster();
  }

  /**
   * Resumes a hold a previous agent left, and rejoins this pod's member once a recovery removed it:
   * when its etcd does not answer or knows no leader, and the cluster that answers keeps a recovery
   * record naming the member its data directory holds, hold etcd, let prepare's passes move the data
   * aside and join a learner, and lift the hold.
   */
  private async watch(): Promise<void> {
    const control = this.control as EtcdStartControl;
    const prepare = this.deps.prepare as PrepareOptions;
    const { cluster, config, logger, membership } = this.deps;
    if (this.acting > 0) return;
    const order = this.readOrder();
    if (order !== undefined && order.step !== 'done') {
      // An order a previous agent left half done: finish it (or call it off) now.
      await this.serialized(() => this.carryOut(order, Deadline.in(30_000))).catch((err: unknown) =>
        logger.warn('recovery resume failed', { error: err instanceof Error ? err.message : String(err) }),
      );
      return;
    }
    const held = control.heldBy();
    if (held === undefined) {
      const dir = readDataDir(prepare.dataDir);
      if (dir.kind !== 'member') return;
      const status = await cluster.memberStatus(config.localEndpoint, config.statusTimeoutMs).catch(() => undefined);
      if (status !== undefined && status.leaderId !== '0') return;
      const record = await readRecoveryRecord(cluster, config.keyPrefix, Deadline.in(1500)).catch(() => undefined);
      if (record === undefined || !mustRejoin({ dataDir: dir, leaderId: status?.leaderId, record })) return;
      logger.warn('this member was removed by a recovery: holding etcd to move its data aside and rejoin as a learner', { member: dir.memberId, recovery: record.id });
      control.hold(`rejoin-${record.id}`);
      crashPoint('rejoin-hold-asked');
    }
    const nonce = control.heldBy() as string;
    if (!control.isHeld(nonce)) return;
    const outcome = await preparePasses(prepare, { cluster, membership, logger }, { until: Date.now() + 20_000, sidecar: true, control });
    if (!outcome.prepared) return;
    control.release();
    logger.info('etcd prepared again and released', { nonce, state: outcome.step.state, reason: outcome.step.reason });
    crashPoint('rejoin-released');
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

/**
 * Whether the start with `--force-new-cluster` was lost: the one-shot file was consumed, but etcd runs
 * from a plain start (the script's state does not say `once`) and still lists other members, for
 * longer than replaying its log could take. Then the flag never took effect.
 */
class LostStartWatch {
  private since?: number;

  async sees(control: EtcdStartControl, members: () => Promise<Member[]>): Promise<boolean> {
    const state = control.state();
    const listed = state.kind === 'running' && !state.once && !control.onceState().pending ? await members().catch(() => undefined) : undefined;
    if (listed === undefined || listed.length <= 1) {
      this.since = undefined;
      return false;
    }
    this.since ??= Date.now();
    return Date.now() - this.since >= LOST_START_MS;
  }
}
