/**
 * The health observer (docs/api.md §4 GET /v1/health, /v1/health/local, /metrics): live, shared,
 * bounded-age observations of the cluster. What one observation reads, and in what order, is in
 * observe-cluster.ts; here, how observations are shared, aged and counted.
 *
 * Invariant: nothing here repeats an old answer, so a cluster whose members are all down never
 * reads as ready. A caller is served an observation only if it started at most the max age ago;
 * otherwise it joins the one in flight or starts one, and if none is fresh by its arrival plus the
 * max age it gets `unknown` (503), never the previous result (see shared-observation.ts).
 *
 * `observedAt` is when the observation started, and `ageMs` is measured from there (the oldest
 * moment any of its evidence can be from) to the instant the answer judged it fresh, so it is never
 * above the max age.
 *
 * No timers run when nobody asks. A Prometheus scrape asks too: the health gauges' `collect()`
 * shares a fresh observation, so `etcd_agent_cluster_healthy` is never a stale 1. The gauges are
 * set in health-metrics.ts; on `unknown` the quorum gauges are absent, not 0.
 */
import type { Deadline } from '../lib/deadline';
import type { Config } from '../config/config';
import type { EtcdCluster } from '../etcd/cluster-client';
import { recordClusterHealth, recordUnknownHealth } from './health-metrics';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import type { ObservedVoters } from '../membership/quorum-gate';
import type { MaintenanceView } from '../proto/maintenance';
import type { Member, OperationRecord } from '../proto/types';
import { classify, probeOf } from './classify';
import { classifyLocal, type LocalOptions } from './classify-local';
import { gatherFacts, type ReadList } from './observe-cluster';
import type { ClusterHealth, LocalHealth, ObservedFacts, RoleReading, StatusProbe } from './types';
import { NOT_ASKED } from './reask';
import { settle } from './settle';
import { freshTogether, Observed, SharedObservation } from './shared-observation';
import { QuorumLossClock, QUORUM_LOSS_MAX_GAP_MS } from './quorum-loss';

/** The most of the max age kept back for classifying and answering (a tenth of it, when that is less). */
const MARGIN_MAX_MS = 100;

/** What the observer needs; `operations` lists the membership lock's records (GET /v1/operations). */
export interface HealthObserverDeps {
  cluster: Pick<EtcdCluster, 'listMembers' | 'memberListAt' | 'localMemberList' | 'memberStatus' | 'alarms'>;
  config: Pick<Config, 'endpoints' | 'localEndpoint' | 'memberName' | 'healthMaxAgeMs' | 'statusTimeoutMs'>;
  metrics: Metrics;
  logger: Logger;
  operations?: (deadline: Deadline) => Promise<OperationRecord[]>;
  /** The note this pod's etcd container left when it refused to start etcd (ETCD_AGENT_START_NOTE_FILE), if any. */
  startNote?: () => Promise<string | undefined>;
  /** The defragmentation this agent runs now, if any (the maintenance service's view). */
  maintenance?: () => MaintenanceView | undefined;
}

/** One finished observation: what it saw and how that classifies. */
export interface Observation {
  facts: ObservedFacts;
  health: ClusterHealth;
}

/** `/v1/health`'s answer; `observedAt`/`ageMs` are null when it is `unknown`. */
export interface ClusterAnswer {
  health: ClusterHealth;
  observedAt: string | null;
  ageMs: number | null;
}

/** `/v1/health/local`'s answer; `observedAt`/`ageMs` are those of its oldest evidence. */
export interface LocalAnswer {
  local: LocalHealth;
  observedAt: string | null;
  ageMs: number | null;
}

/** Observes the cluster on demand and shares each observation among its callers. */
export class HealthObserver {
  private readonly clusterView: SharedObservation<Observation>;
  private readonly localView: SharedObservation<StatusProbe>;
  private readonly maxAgeMs: number;
  private readonly statusTimeoutMs: number;
  /** Budget kept back from the max age for classifying and answering. */
  private readonly marginMs: number;
  private lastList?: ReadList;
  private lastStatus?: ClusterHealth['status'];
  private refreshing?: Promise<void>;
  /** When the last reading without a role was confirmed (`role`), on the performance.now() clock. */
  private lastConfirmation = -Infinity;
  private closed = false;
  private readonly stopScrapes: () => void;
  /** The stretch of observations that found no quorum (GET /v1/recovery's `quorumLostSince`). */
  private readonly lossClock = new QuorumLossClock(QUORUM_LOSS_MAX_GAP_MS);

  constructor(private readonly deps: HealthObserverDeps) {
    this.maxAgeMs = deps.config.healthMaxAgeMs;
    this.statusTimeoutMs = deps.config.statusTimeoutMs;
    this.marginMs = Math.min(MARGIN_MAX_MS, Math.round(this.maxAgeMs / 10));
    this.clusterView = new SharedObservation(this.maxAgeMs, (startedAt) => this.observe(startedAt));
    this.localView = new SharedObservation(this.maxAgeMs, (startedAt) => this.probe(deps.config.localEndpoint, this.callMs(startedAt)));
    this.stopScrapes = deps.metrics.onScrape(() => this.refreshGauges());
  }

  /** The cluster's health, from an observation no older than the max age, else `unknown`. */
  async cluster(arrival = performance.now()): Promise<ClusterAnswer> {
    const {
      found: [observed],
      at,
    } = await freshTogether([this.clusterView], arrival);
    if (observed === undefined) return { health: this.unknown(), observedAt: null, ageMs: null };
    return { health: observed.value.health, ...age(observed, at) };
  }

  /**
   * This pod's own member, asked at `ETCD_AGENT_LOCAL_ENDPOINT`, beside a fresh cluster observation;
   * with `notBefore`, from observations begun at or after it.
   */
  async local(arrival = performance.now(), options: LocalOptions = {}, notBefore?: number): Promise<LocalAnswer> {
    const {
      found: [cluster, local],
      at,
    } = await freshTogether([this.clusterView, this.localView], arrival, notBefore);
    const probe: StatusProbe = local?.value ?? {
      url: this.deps.config.localEndpoint,
      error: `no status answer within ${this.maxAgeMs} ms`,
    };
    const health = classifyLocal(probe, cluster?.value, this.deps.config.memberName, options);
    const oldest = [cluster, local].filter((o) => o !== undefined).sort((a, b) => a.startedAt - b.startedAt)[0];
    return { local: health, ...(oldest === undefined ? { observedAt: null, ageMs: null } : age(oldest, at)) };
  }

  /**
   * The voters as the newest observation saw them, and when it started (`performance.now()`), while
   * it is fresh (started within the max age and finished in time); undefined otherwise, or when it
   * knew no voter. No etcd call: the quorum gate's first look (membership/quorum-gate.ts).
   */
  quorumEvidence(now = performance.now()): ObservedVoters | undefined {
    const newest = this.clusterView.newest;
    if (newest === undefined || now - newest.startedAt > this.maxAgeMs || newest.finishedAt - newest.startedAt > this.maxAgeMs)
      return undefined;
    const { health, facts } = newest.value;
    const voters = health.members.filter((m) => !m.isLearner);
    if (voters.length === 0) return undefined;
    const silent = voters.filter((m) => !m.reachable);
    // Which silent voters only ran out of time: their probe, found by the client URL the list gives.
    const listed = facts.memberList?.members ?? [];
    const outOfTime = (id: string): boolean => {
      const member = listed.find((m) => m.id === id);
      return member !== undefined && probeOf(member, facts.probes)?.outOfTime === true;
    };
    const evidence = {
      voters: voters.length,
      answering: voters.length - silent.length,
      outOfTime: silent.filter((m) => outOfTime(m.id)).length,
      leader: health.leader !== null,
      listedBefore: facts.memberList?.fresh !== true,
    };
    return {
      evidence,
      startedAt: newest.startedAt,
      silent: silent.map((m) => ({ member: m.name || m.id, error: m.errors.length === 0 ? 'no answer' : m.errors.join('; ') })),
    };
  }

  /**
   * This pod's member's role, read from the same two observations as `local` (role.ts): no etcd
   * call while they are fresh. `maxAgeMs` is their bound, for a reading without a role to say so.
   */
  async role(arrival = performance.now()): Promise<{ reading: RoleReading; maxAgeMs: number }> {
    const first = (await this.local(arrival)).local.reading;
    const now = performance.now();
    if (first.kind === 'role' || now - this.lastConfirmation < this.maxAgeMs) return { reading: first, maxAgeMs: this.maxAgeMs };
    // No role fails the caller's probe: that is confirmed once by observations begun now (the first
    // after a start pays for connecting to etcd, and may miss its budget). At most one confirmation
    // per max age, so a member that is really down does not raise the load with the probe rate.
    this.lastConfirmation = now;
    return { reading: (await this.local(now, {}, now)).local.reading, maxAgeMs: this.maxAgeMs };
  }

  /**
   * Since when (wall-clock ms) this agent's observations have found the quorum lost without a break,
   * or undefined when the last one found it, or nobody has looked for too long (quorum-loss.ts).
   */
  quorumLostSince(now = Date.now()): number | undefined {
    return this.lossClock.since(now);
  }

  /** Whether the last observation that counted found the quorum lost: the recovery service then keeps looking. */
  lastSawQuorumLoss(): boolean {
    return this.lossClock.lastSawLoss();
  }

  /** The last member list any observation read (fresh or not), or undefined before the first. */
  lastMembers(): Member[] | undefined {
    return this.lastList?.members;
  }

  /** Stops updating metrics; observations in flight end by their own deadlines. */
  close(): void {
    this.closed = true;
    this.stopScrapes();
  }

  private unknown(): ClusterHealth {
    return {
      status: 'unknown',
      quorum: null,
      leader: null,
      members: [],
      alarms: [],
      errors: [`no observation finished within ${this.maxAgeMs} ms (ETCD_AGENT_HEALTH_MAX_AGE_MS)`],
    };
  }

  /** Milliseconds a call started now may take: the status timeout, cut to what is left of the budget. */
  private callMs(startedAt: number): number {
    const left = startedAt + this.maxAgeMs - this.marginMs - performance.now();
    return Math.max(0, Math.floor(Math.min(this.statusTimeoutMs, left)));
  }

  private async observe(startedAt: number): Promise<Observation> {
    const { cluster, operations, config, startNote, maintenance } = this.deps;
    const facts = await gatherFacts({
      cluster,
      config,
      operations,
      startNote,
      maintenance,
      known: this.lastList,
      remember: (members) => (this.lastList = { members, readAt: new Date().toISOString() }),
      probe: (url) => this.probe(url, this.callMs(startedAt)),
      callMs: () => this.callMs(startedAt),
    });
    const observation = { facts, health: classify(facts) };
    const late = performance.now() - startedAt > this.maxAgeMs;
    // A late observation may have cut calls short, so it is no evidence of a loss; a quorum it found still answered.
    const hasQuorum = observation.health.quorum?.hasQuorum ?? false;
    this.lossClock.see({ at: Date.now() - (performance.now() - startedAt), hasQuorum: late && !hasQuorum ? undefined : hasQuorum });
    this.record(observation, late);
    return observation;
  }

  /** One Status call, never throwing: an error becomes the probe's `error`. */
  private async probe(url: string, timeoutMs: number): Promise<StatusProbe> {
    if (timeoutMs <= 0) return { url, error: NOT_ASKED, outOfTime: true };
    const answer = await settle((ms) => this.deps.cluster.memberStatus(url, ms), timeoutMs);
    if (answer.ok) return { url, status: answer.value };
    return { url, error: answer.error, ...(answer.outOfTime === true ? { outOfTime: true as const } : {}) };
  }

  /** Counts the observation, updates the gauges and logs a change of status. */
  private record(observation: Observation, late: boolean): void {
    const { metrics, logger } = this.deps;
    const { health } = observation;
    metrics.healthObservations.inc({ result: late ? 'unknown' : health.status });
    if (this.closed) return;
    if (late) recordUnknownHealth(metrics);
    else recordClusterHealth(metrics, health);
    const status = late ? 'unknown' : health.status;
    if (status !== this.lastStatus) {
      logger.log(status === 'healthy' ? 'info' : 'warn', 'cluster health changed', {
        from: this.lastStatus ?? 'none',
        to: status,
        quorum: health.quorum,
        errors: health.errors.slice(0, 5),
      });
      this.lastStatus = status;
    }
  }

  /** At scrape time: a fresh (shared) observation for the gauges, and the age of the newest one. */
  private refreshGauges(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.refreshing ??= (async () => {
      try {
        const answer = await this.cluster();
        if (answer.health.status === 'unknown' && !this.closed) recordUnknownHealth(this.deps.metrics);
        const newest: Observed<Observation> | undefined = this.clusterView.newest;
        this.deps.metrics.healthObservationAge.set(newest === undefined ? Number.NaN : (performance.now() - newest.startedAt) / 1000);
      } finally {
        this.refreshing = undefined;
      }
    })();
    return this.refreshing;
  }
}

/** `observed`'s start and its age at `at`, the instant it was judged fresh (`freshTogether`). */
function age(observed: Observed<unknown>, at: number): { observedAt: string; ageMs: number } {
  return {
    observedAt: observed.observedAt.toISOString(),
    ageMs: Math.max(0, Math.round(at - observed.startedAt)),
  };
}
