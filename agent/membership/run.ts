/**
 * One execution of a lifecycle action: its deadline, the step it has reached
 * and its log (the RPCs it sent and how they failed, the last probe it made),
 * and the I/O every action shares — read the member list, probe, take the lock,
 * send one RPC and log it, run the pass again when converge.ts says so, and
 * render the answer a pure decision made. It decides nothing itself; nothing
 * here outlives the call.
 */
import type { Config } from '../config/config';
import type { Deadline } from '../lib/deadline';
import type { ChangeKind, EtcdCluster } from '../etcd/cluster-client';
import type { HeldLock, StepRecorder } from '../etcd/held-lock';
import type { MembershipLock, OperationIntent } from '../etcd/lock';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { AgentError, isAgentError } from '../proto/errors';
import type { ActionName, ActionResult, Member, MemberList } from '../proto/types';
import type { Answer, NeedsProbe } from './answer';
import { converge, type RetryFilter } from './converge';
import { summarizeCluster } from './match';
import { probeMembers, reaskWithin, type ClusterProbe } from './probe';
import type { QuorumGate } from './quorum-gate';
import { isNoQuorum } from './quorum-verdict';

/** What the membership service is built from. */
export interface MembershipServiceDeps {
  cluster: EtcdCluster;
  config: Config;
  logger: Logger;
  metrics: Metrics;
  /** The process's quorum gate (quorum-gate.ts); the service makes one of its own without it. */
  gate?: QuorumGate;
}

/** What the membership actions need: the service's parts, the cluster-wide lock and the quorum gate. */
export interface MembershipDeps extends MembershipServiceDeps {
  lock: MembershipLock;
  gate: QuorumGate;
}

/** Who asked: carried into the log lines of the changes a call makes. */
export interface CallContext {
  requestId?: string;
}

/** A decision that answers at once, or asks for an act of type `A` (an RPC, a leadership move). */
export type Decided<A> = { kind: 'answer'; answer: Answer } | A;

/** An action's pure decision over the member list and (when it asks for one) the probe. */
export type Decide<A> = (list: MemberList, probe?: ClusterProbe) => Decided<A> | NeedsProbe;

/** What `perform` needs besides the decision: whom the lock names, and how to act. */
export interface Acting<A> {
  /** The member the lock's operation record names, from the first decision. */
  intent: (first: A) => OperationIntent['member'];
  /** Does what `decision` asks under `held` and answers; `again` reads and decides again (after a step of several). */
  act: (held: HeldLock, list: MemberList, decision: A) => Promise<Answer | 'again'>;
  /** Failures besides transient ones after which the pass is tried again (see `converge`). */
  alsoRetry?: RetryFilter;
}

function isProbe<A>(decision: Decided<A> | NeedsProbe): decision is NeedsProbe {
  return (decision as { kind: string }).kind === 'probe';
}

function isAnswer<A>(decision: Decided<A>): decision is { kind: 'answer'; answer: Answer } {
  return (decision as { kind: string }).kind === 'answer';
}

/** One execution of one action. */
export class ActionRun {
  private readonly startedAt = performance.now();
  /** Membership RPCs this execution has sent (whatever etcd answered): what its decisions know of the past. */
  readonly sent = new Set<ChangeKind>();
  /** The last step begun, named in a `timeout` answer's details. */
  step = 'starting';
  /** The last probe of this execution: says whether an "unhealthy cluster" refusal is etcd settling or real. */
  lastProbe?: ClusterProbe;
  /** Failures of the RPCs this execution sent: after one, a new read may find the change done. */
  private readonly actFailures = new WeakSet<object>();
  /** Failures of its member-list reads, which the cluster client already retried inside the deadline. */
  private readonly readFailures = new WeakSet<object>();

  constructor(
    readonly deps: MembershipDeps,
    readonly action: ActionName,
    readonly deadline: Deadline,
    readonly context: CallContext = {},
  ) {}

  /**
   * The member list, asked linearizable. etcd 3.4 ignores that flag and answers from the copy of the
   * member asked, which may lag a change by moments: hence every change reads again under the lock,
   * and etcd's "Peer URLs already exists" / "member not found" after a read send us to read again.
   */
  readMembers(): Promise<MemberList> {
    this.begin('reading the member list');
    return this.throughQuorum((d) => this.deps.cluster.listMembers(d)).catch((err: unknown) => {
      if (typeof err === 'object' && err !== null) this.readFailures.add(err);
      throw err;
    });
  }

  /**
   * Status of every member in `members`, in parallel, each within the configured status timeout;
   * a voter that did not answer is asked once more with twice that (inside the deadline), so that
   * a slow answer is not taken for a member down by a quorum guard (reaskWithin).
   */
  async probe(members: Member[]): Promise<ClusterProbe> {
    this.begin('asking the members for their status');
    const first = await probeMembers(this.deps.cluster, members, this.statusTimeoutMs());
    const silentVoter = first.silent.some((p) => !p.member.isLearner);
    this.lastProbe = silentVoter ? await reaskWithin(this.deps.cluster, first, this.deps.config.statusTimeoutMs, this.deadline) : first;
    return this.lastProbe;
  }

  /**
   * Every action's shape: read and decide outside the lock (calls with nothing to do end there);
   * otherwise take the lock and, inside `converge`, read again, decide again and act on that
   * decision, until the decision or the act answers.
   */
  async perform<A extends { kind: string }>(decide: Decide<A>, acting: Acting<A>): Promise<ActionResult> {
    const first = await this.decide(await this.readMembers(), decide);
    if (isAnswer(first)) return this.answer(first.answer);
    const intent = { action: this.action, member: acting.intent(first) };
    return this.underLock(intent, (held) =>
      converge(
        this,
        async () => {
          for (;;) {
            const list = await this.readMembers();
            const next = await this.decide(list, decide);
            if (isAnswer(next)) return this.answer(next.answer);
            const answer = await acting.act(held, list, next);
            if (answer !== 'again') return this.answer(answer);
          }
        },
        acting.alsoRetry,
      ),
    );
  }

  /**
   * Applies `decide` to `list`; when the decision first needs the members' live status, probes
   * them and decides again with it, so that a call with nothing to do never pays for a probe.
   */
  async decide<A>(list: MemberList, decide: Decide<A>): Promise<Decided<A>> {
    const first = decide(list);
    const decision = isProbe(first) ? decide(list, await this.probe(list.members)) : first;
    if (isProbe(decision)) throw new AgentError('internal', 'a decision asked for a probe it was given');
    return decision;
  }

  /** The deadline of one Status call: the configured one, never past the call's own deadline. */
  statusTimeoutMs(): number {
    return this.deadline.budget(this.deps.config.statusTimeoutMs);
  }

  /** Takes the membership lock (recording `intent`), runs `fn`, and releases the lock whatever happens. */
  async underLock<T>(intent: OperationIntent, fn: (held: HeldLock) => Promise<T>): Promise<T> {
    this.begin('waiting for the membership lock');
    // A lock taken after the gate gave up on it is released at once: nobody will use it.
    const held = await this.throughQuorum(
      (d) => this.deps.lock.acquire(intent, d),
      (late) => late.release(),
    );
    let result: T;
    try {
      result = await fn(held);
    } catch (err) {
      // Without a quorum the release cannot commit either: answer now, and let it finish (or the
      // lease expire) behind the answer; a later call of this agent takes its own lock over.
      const releasing = held.release();
      if (!isNoQuorum(err)) await releasing;
      throw err;
    }
    await held.release();
    return result;
  }

  /**
   * `call` (a read or write etcd answers only through a quorum) under the quorum gate: `unavailable`
   * with the figures as soon as no quorum of voters answers, instead of at the deadline.
   */
  throughQuorum<T>(call: (deadline: Deadline) => Promise<T>, late?: (value: T) => unknown): Promise<T> {
    return this.deps.gate.through(this.deadline, this.step, call, late);
  }

  /** Records `step` as begun; throws `timeout` naming it when the deadline has already passed. */
  begin(step: string): void {
    this.step = step;
    this.deadline.check(step);
  }

  /**
   * Sends one membership RPC under `held`: records the step first (so `GET /v1/operations` shows
   * what is being done), then logs one line with the result. `member` is what the line names.
   */
  async send<T>(held: StepRecorder, kind: ChangeKind, member: LoggedMember, rpc: () => Promise<T>): Promise<T> {
    held.assertHeld();
    this.begin(`sending ${kind}`);
    await this.throughQuorum((d) => held.setStep(`sending ${kind}`, d));
    this.sent.add(kind);
    try {
      const result = await rpc();
      this.logChange(kind, member, 'done');
      return result;
    } catch (err) {
      if (typeof err === 'object' && err !== null) this.actFailures.add(err);
      this.logChange(kind, member, isAgentError(err) ? err.code : 'failed', err instanceof Error ? err.message : String(err));
      throw err;
    }
  }

  /** Where `err` came from: an RPC this execution sent, one of its member-list reads, or elsewhere (e.g. a probe's verdict). */
  failedIn(err: unknown): 'act' | 'read' | 'other' {
    if (typeof err !== 'object' || err === null) return 'other';
    return this.actFailures.has(err) ? 'act' : this.readFailures.has(err) ? 'read' : 'other';
  }

  /** The one JSON line per membership change: what, which member, how it ended. */
  logChange(what: ChangeKind, member: LoggedMember, outcome: string, error?: string): void {
    this.deps.logger.info('membership change', {
      what,
      action: this.action,
      member: { id: member.id, name: member.name, peerURLs: member.peerURLs },
      outcome,
      ...(error === undefined ? {} : { error }),
      requestId: this.context.requestId,
    });
  }

  /** Milliseconds since this execution started. */
  elapsedMs(): number {
    return Math.round(performance.now() - this.startedAt);
  }

  /** The contract's success body (without the request id). */
  answer(a: Answer): ActionResult {
    return {
      action: this.action,
      outcome: a.outcome,
      complete: a.complete,
      ...(a.phase === undefined ? {} : { phase: a.phase }),
      ...(a.member === undefined ? {} : { member: a.member }),
      cluster: summarizeCluster(a.list.clusterId, a.list.members),
      leaderTransferred: a.leaderTransferred ?? false,
      ...(a.leader === undefined ? {} : { leader: a.leader }),
      durationMs: this.elapsedMs(),
    };
  }
}

/** How a member is named in a log line. */
export interface LoggedMember {
  id?: string;
  name: string;
  peerURLs: string[];
}
