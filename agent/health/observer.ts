/**
 * The health observer (CONTRACT §4 GET /v1/health, /v1/health/local, /metrics): live, shared,
 * bounded-age observations of the cluster. This is the answer to an operator that reported a
 * cluster "ready" for a day while every member was down: nothing here repeats an old answer.
 *
 * One observation, all calls in parallel and each bounded by `ETCD_AGENT_STATUS_TIMEOUT_MS` and by
 * the observation's budget (a little under `ETCD_AGENT_HEALTH_MAX_AGE_MS`):
 * - the member list (through the configured endpoints);
 * - a Status call to every member's own client URL (its first one). The URLs come from the last
 *   member list read, so the calls start beside the list read instead of after it; members the new
 *   list adds are asked as soon as it arrives. Before any list was read, the list comes first;
 * - the alarm list, and the operation records when the membership lock is wired in.
 * So an observation costs at most one Status call per member, whatever the request rate; only when
 * fewer voters than a quorum answered are the silent ones asked once more, in what is left of the
 * budget (reask.ts), so that one slow round does not read as a quorum lost.
 *
 * When the configured endpoints cannot give the list (down, or a learner, where etcd 3.4 refuses
 * MemberList), it is read at a voter that answered its Status call. When no one gives it, the last
 * one read only directs the Status calls and counts the quorum: `classify` never calls that
 * `healthy` (see classify.ts). When none was ever read (an agent started while the quorum is lost),
 * a member's own copy, read without a quorum, does that instead. Once every known member has failed its Status call the observation
 * ends without waiting for the other reads: the answer is `unavailable` whatever they say.
 *
 * A caller is served an observation only if it started at most the max age ago; otherwise it joins
 * the one in flight or starts one, and if none is fresh by its arrival plus the max age it gets
 * `unknown` (503), never the previous result (see shared-observation.ts).
 *
 * `observedAt` is when the observation started, and `ageMs` is measured from there: that is the
 * oldest moment any of its evidence can be from.
 *
 * No timers run when nobody asks. A Prometheus scrape asks too: the health gauges' `collect()`
 * shares a fresh observation, so `etcd_agent_cluster_healthy` is never a stale 1. The gauges are
 * set in health-metrics.ts; on `unknown` the quorum gauges are absent, not 0.
 */
import { Deadline } from '../lib/deadline';
import type { Config } from '../config/config';
import type { EtcdCluster } from '../etcd/cluster-client';
import { failureLine } from '../etcd/errors';
import { recordClusterHealth, recordUnknownHealth } from './health-metrics';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { hasQuorum } from '../membership/quorum';
import type { QuorumEvidence } from '../membership/quorum-verdict';
import type { MaintenanceView } from '../proto/maintenance';
import type { Member, OperationRecord } from '../proto/types';
import { canonicalUrl, classify } from './classify';
import { classifyLocal, type LocalOptions } from './classify-local';
import type { ClusterHealth, LocalHealth, ObservedFacts, RoleReading, StatusProbe } from './types';
import { NOT_ASKED, urlsToAskAgain } from './reask';
import { Observed, SharedObservation } from './shared-observation';
import { QuorumLossClock, QUORUM_LOSS_MAX_GAP_MS } from './quorum-loss';

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
  private lastList?: { members: Member[]; readAt: string };
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
    this.marginMs = Math.min(100, Math.round(this.maxAgeMs / 10));
    this.clusterView = new SharedObservation(this.maxAgeMs, (startedAt) => this.observe(startedAt));
    this.localView = new SharedObservation(this.maxAgeMs, (startedAt) =>
      this.probe(deps.config.localEndpoint, this.callMs(startedAt)),
    );
    this.stopScrapes = deps.metrics.onScrape(() => this.refreshGauges());
  }

  /** The cluster's health, from an observation no older than the max age, else `unknown`. */
  async cluster(arrival = performance.now()): Promise<ClusterAnswer> {
    const observed = await this.clusterView.get(arrival);
    if (observed === undefined) return { health: this.unknown(), observedAt: null, ageMs: null };
    return { health: observed.value.health, ...age(observed) };
  }

  /**
   * This pod's own member, asked at `ETCD_AGENT_LOCAL_ENDPOINT`, beside a fresh cluster observation;
   * with `notBefore`, from observations begun at or after it.
   */
  async local(arrival = performance.now(), options: LocalOptions = {}, notBefore?: number): Promise<LocalAnswer> {
    const [cluster, local] = await Promise.all([this.clusterView.get(arrival, notBefore), this.localView.get(arrival, notBefore)]);
    const probe: StatusProbe = local?.value ?? {
      url: this.deps.config.localEndpoint,
      error: `no status answer within ${this.maxAgeMs} ms`,
    };
    const health = classifyLocal(probe, cluster?.value, this.deps.config.memberName, options);
    const oldest = [cluster, local].filter((o) => o !== undefined).sort((a, b) => a.startedAt - b.startedAt)[0];
    return { local: health, ...(oldest === undefined ? { observedAt: null, ageMs: null } : age(oldest)) };
  }

  /**
   * The voters as the newest observation saw them, and when it started (`performance.now()`), while
   * it is fresh (started within the max age and finished in time); undefined otherwise, or when it
   * knew no voter. No etcd call: the quorum gate's first look (membership/quorum-gate.ts).
   */
  quorumEvidence(now = performance.now()): { evidence: QuorumEvidence; startedAt: number } | undefined {
    const newest = this.clusterView.newest;
    if (newest === undefined || now - newest.startedAt > this.maxAgeMs || newest.finishedAt - newest.startedAt > this.maxAgeMs) return undefined;
    const { health } = newest.value;
    const voters = health.members.filter((m) => !m.isLearner);
    if (voters.length === 0) return undefined;
    const evidence = { voters: voters.length, answering: voters.filter((m) => m.reachable).length, leader: health.leader !== null };
    return { evidence, startedAt: newest.startedAt };
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
    const { cluster, operations, config } = this.deps;
    const probes = new Map<string, Promise<StatusProbe>>();
    const ask = (url: string | undefined): void => {
      if (url === undefined || probes.has(canonicalUrl(url))) return;
      probes.set(canonicalUrl(url), this.probe(url, this.callMs(startedAt)));
    };
    const known = this.lastList;
    known?.members.forEach((m) => ask(m.clientURLs[0]));

    // When every known member has failed its status call, the answer is `unavailable` whatever
    // the list says: do not wait for reads that retry until their deadline.
    const silent = known === undefined ? undefined : Promise.all(probes.values()).then((ps) => ps.every((p) => p.status === undefined));
    const cut = <T>(read: Promise<Settled<T>>): Promise<Settled<T>> =>
      silent === undefined
        ? read
        : Promise.race([read, silent.then((none) => (none ? { ok: false as const, error: 'not waited for: no member answered' } : read))]);
    const listing = cut(settle((ms) => cluster.listMembers(Deadline.in(ms)), this.callMs(startedAt)));
    const alarming = cut(settle((ms) => cluster.alarms(Deadline.in(ms)), this.callMs(startedAt)));
    const recording =
      operations === undefined ? undefined : cut(settle((ms) => operations(Deadline.in(ms)), this.callMs(startedAt)));
    const noting = this.deps.startNote?.().catch(() => undefined);
    // Never read a list yet: a member's own copy, asked beside the list, in case no quorum answers.
    const ownCopy = known === undefined ? settle((ms) => cluster.localMemberList(Deadline.in(ms)), this.callMs(startedAt)) : undefined;

    let list = await listing;
    if (!list.ok) {
      // Read it where a voter answers instead: the configured endpoints may be down, or a learner
      // (etcd 3.4 refuses MemberList on one). With no list known yet, ask the configured endpoints
      // for their status first, to find such a voter.
      if (known === undefined) config.endpoints.forEach(ask);
      const copy = ownCopy === undefined ? undefined : await ownCopy;
      if (copy?.ok === true) copy.value.members.forEach((m) => ask(m.clientURLs[0]));
      const answers = await Promise.all(probes.values());
      const voter = answers.find((p) => p.status !== undefined && !p.status.isLearner);
      // Where fewer voters answer than a quorum, that voter cannot serve a linearizable list either
      // (etcd 3.5+): asking it would only spend the rest of the budget and make the answer late.
      const members = copy?.ok === true ? copy.value.members : known?.members;
      if (voter !== undefined && (members === undefined || quorumAnswers(members, answers))) {
        const fallback = await settle((ms) => cluster.memberListAt(voter.url, ms), this.callMs(startedAt));
        if (fallback.ok) list = fallback;
      }
    }
    let memberList: ObservedFacts['memberList'];
    if (list.ok) {
      this.lastList = { members: list.value.members, readAt: new Date().toISOString() };
      list.value.members.forEach((m) => ask(m.clientURLs[0]));
      memberList = { members: list.value.members, fresh: true, readAt: this.lastList.readAt };
    } else if (known !== undefined) {
      memberList = { members: known.members, fresh: false, readAt: known.readAt };
    } else if (ownCopy !== undefined) {
      // Never read one, and no quorum to read it through now: a member's own copy (no quorum needed)
      // still says whom to ask and how many voters there are, so "2 of 4 voters" is not "0 of 0".
      // Not `fresh`: it may lag, and classify never calls such an observation healthy.
      const local = await ownCopy;
      if (local.ok) {
        local.value.members.forEach((m) => ask(m.clientURLs[0]));
        memberList = { members: local.value.members, fresh: false, readAt: new Date().toISOString() };
      }
    }
    // Short of a quorum of answers: the silent voters once more, in what is left of the budget (reask.ts).
    for (const url of urlsToAskAgain(memberList?.members, await Promise.all(probes.values()))) {
      probes.set(canonicalUrl(url), this.probe(url, this.callMs(startedAt)));
    }
    const [answers, alarms, records, note] = await Promise.all([Promise.all(probes.values()), alarming, recording, noting]);
    const maintenance = this.deps.maintenance?.();
    const facts: ObservedFacts = {
      ...(maintenance === undefined ? {} : { maintenance }),
      memberList,
      probes: answers,
      ...(list.ok ? {} : { memberListError: list.error }),
      ...(alarms.ok ? { alarms: alarms.value } : { alarmsError: alarms.error }),
      ...(records === undefined ? {} : records.ok ? { operations: records.value } : { operationsError: records.error }),
      ...(note === undefined ? {} : { startNote: { member: config.memberName, text: note } }),
    };
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
    if (timeoutMs <= 0) return { url, error: NOT_ASKED };
    const answer = await settle((ms) => this.deps.cluster.memberStatus(url, ms), timeoutMs);
    return answer.ok ? { url, status: answer.value } : { url, error: answer.error };
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
        this.deps.metrics.healthObservationAge.set(
          newest === undefined ? Number.NaN : (performance.now() - newest.startedAt) / 1000,
        );
      } finally {
        this.refreshing = undefined;
      }
    })();
    return this.refreshing;
  }
}

function age(observed: Observed<unknown>): { observedAt: string; ageMs: number } {
  return {
    observedAt: observed.observedAt.toISOString(),
    ageMs: Math.max(0, Math.round(performance.now() - observed.startedAt)),
  };
}

type Settled<T> = { ok: true; value: T } | { ok: false; error: string };

/**
 * Runs `call` with `ms` to spend and settles by then, whatever the call does: etcd3's own deadlines
 * normally end it first, but an observation must not depend on that (or on etcd3's retries).
 */
function settle<T>(call: (ms: number) => Promise<T>, ms: number): Promise<Settled<T>> {
  if (ms <= 0) return Promise.resolve({ ok: false, error: NOT_ASKED });
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const done = (result: Settled<T>): void => {
      clearTimeout(timer);
      resolve(result);
    };
    Promise.resolve()
      .then(() => {
        const answer = call(ms);
        // Timed from here: the call's synchronous start (the first one loads etcd3 and gRPC, which
        // blocks for a while on a cold start) happens before its own deadline is set, too.
        timer = setTimeout(() => resolve({ ok: false, error: `no answer within ${ms} ms` }), ms + 20);
        return answer;
      })
      .then(
        (value) => done({ ok: true, value }),
        (err: unknown) => done({ ok: false, error: failureLine(err, ms) }),
      );
  });
}

/** True when the voters of `members` that answered a status call among `answers` make a quorum. */
function quorumAnswers(members: Member[], answers: StatusProbe[]): boolean {
  const answered = new Set(answers.flatMap((p) => (p.status === undefined ? [] : [p.status.memberId])));
  const voters = members.filter((m) => !m.isLearner);
  return hasQuorum(voters.length, voters.filter((m) => answered.has(m.id)).length);
}
