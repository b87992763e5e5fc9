/**
 * One execution of a lifecycle action: its deadline, what it has sent so far,
 * and the steps every mutating action shares — read the member list, probe,
 * take the lock, send one RPC and log it, retry transient failures by reading
 * again, and build the answer. Nothing here is remembered between calls.
 */
import pRetry from 'p-retry';
import type { Config } from '../config';
import type { Deadline } from '../deadline';
import type { ChangeKind, EtcdCluster } from '../etcd/cluster-client';
import { isTransient } from '../etcd/errors';
import type { HeldLock } from '../etcd/held-lock';
import type { MembershipLock, OperationIntent } from '../etcd/lock';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { AgentError, isAgentError } from '../proto/errors';
import type { ActionName, ActionResult, Member, MemberList, Outcome, Phase } from '../proto/types';
import { peerUrlFromTemplate, summarizeCluster, validatePeerUrl } from './match';
import { hasQuorum, quorumOf } from './quorum';
import { ClusterProbe, probeMembers } from './probe';

/** What the membership actions need. */
export interface MembershipDeps {
  cluster: EtcdCluster;
  config: Config;
  logger: Logger;
  metrics: Metrics;
  lock: MembershipLock;
}

/** Who asked: carried into the log lines of the changes a call makes. */
export interface CallContext {
  requestId?: string;
}

/** The fields of an answer that an action decides; the run fills in the rest. */
export interface Answer {
  outcome: Outcome;
  complete: boolean;
  phase?: Phase;
  member?: Member;
  /** The member list the answer describes (after the change the action made). */
  list: MemberList;
  leader?: { id: string; name: string };
}

/** A transient failure, or one `alsoRetry` accepts, leads to reading the member list again. */
export type RetryFilter = (err: unknown, attempt: number) => boolean;

/** One execution of one action. */
export class ActionRun {
  private readonly startedAt = performance.now();
  /** Membership RPCs this execution has sent (whatever etcd answered). */
  readonly sent = new Set<ChangeKind>();
  /** Set once this execution has moved leadership. */
  leaderTransferred = false;
  /** The last step begun, named in a `timeout` answer's details. */
  step = 'starting';
  /** The last probe of this execution: says whether an "unhealthy cluster" refusal is etcd settling or real. */
  lastProbe?: ClusterProbe;
  /** When etcd first refused a change of this execution as "unhealthy cluster" while every voter answered. */
  private settlingSince?: number;

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
    return this.deps.cluster.listMembers(this.deadline);
  }

  /** Status of every member in `members`, in parallel, each within the configured status timeout. */
  async probe(members: Member[]): Promise<ClusterProbe> {
    this.begin('asking the members for their status');
    this.lastProbe = await probeMembers(this.deps.cluster, members, this.statusTimeoutMs());
    return this.lastProbe;
  }

  /** The deadline of one Status call: the configured one, never past the call's own deadline. */
  statusTimeoutMs(): number {
    return Math.min(this.deps.config.statusTimeoutMs, Math.max(1, this.deadline.remainingMs()));
  }

  /** Takes the membership lock (recording `intent`), runs `fn`, and releases the lock whatever happens. */
  async underLock<T>(intent: OperationIntent, fn: (held: HeldLock) => Promise<T>): Promise<T> {
    this.begin('waiting for the membership lock');
    const held = await this.deps.lock.acquire(intent, this.deadline);
    try {
      return await fn(held);
    } finally {
      await held.release();
    }
  }

  /**
   * Runs `attempt` (read, decide, act) again after a transient etcd failure, while the deadline
   * allows: each attempt reads the member list afresh, so a change whose answer was lost is found
   * done instead of being sent twice. etcd's "unhealthy cluster" while the probe found every voter
   * answering is etcd settling (it refuses changes for 5 s after a peer connects): retried with
   * backoff up to the deadline, and only then answered `unsafe`, saying how long it waited.
   */
  async converge<T>(attempt: () => Promise<T>, alsoRetry: RetryFilter = () => false): Promise<T> {
    try {
      const result = await pRetry(attempt, {
        // The deadline bounds the attempts (below); transient failures get at most 20 of them.
        retries: 1000,
        minTimeout: 100,
        maxTimeout: 500,
        onFailedAttempt: (err) => {
          const settling = this.isSettling(err);
          if (settling) this.settlingSince ??= Date.now();
          const again = (isTransient(err) && err.attemptNumber <= 20) || settling || alsoRetry(err, err.attemptNumber);
          if (!again || this.deadline.remainingMs() < 600) throw err;
          this.deps.logger.debug(settling ? 'etcd refuses changes while a peer settles; retrying' : 'retrying after a transient failure', {
            action: this.action,
            requestId: this.context.requestId,
            error: err.message,
          });
        },
      });
      if (this.settlingSince !== undefined) {
        this.deps.logger.info('etcd accepted the change after refusing it as "unhealthy cluster"', {
          action: this.action,
          requestId: this.context.requestId,
          waitedMs: Date.now() - this.settlingSince,
        });
      }
      return result;
    } catch (err) {
      throw this.withWait(err);
    }
  }

  /** True for etcd's "unhealthy cluster" when the last probe of this execution found every voter answering. */
  private isSettling(err: unknown): boolean {
    const probe = this.lastProbe;
    const everyVoter = probe !== undefined && probe.voters.length > 0 && probe.healthyVoters === probe.voters.length;
    return everyVoter && etcdSaid(err, isUnhealthyCluster);
  }

  /** An "unhealthy cluster" refusal that was waited on: says so, and for how long (`details.waitedMs`). */
  private withWait(err: unknown): unknown {
    if (this.settlingSince === undefined || !(err instanceof AgentError) || !etcdSaid(err, isUnhealthyCluster)) return err;
    const waitedMs = Date.now() - this.settlingSince;
    const why = this.isSettling(err)
      ? `etcd still refused the change as "unhealthy cluster" after ${waitedMs} ms of retries, although every voter answered its status call`
      : `etcd refused the change as "unhealthy cluster"; it was retried for ${waitedMs} ms, until a voter stopped answering`;
    return new AgentError(err.code, why, { cause: err.cause, retryable: err.retryable, details: { ...err.details, waitedMs } });
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
  async send<T>(held: HeldLock, kind: ChangeKind, member: LoggedMember, rpc: () => Promise<T>): Promise<T> {
    held.assertHeld();
    this.begin(`sending ${kind}`);
    await held.setStep(`sending ${kind}`, this.deadline);
    this.sent.add(kind);
    try {
      const result = await rpc();
      this.logChange(kind, member, 'done');
      return result;
    } catch (err) {
      this.logChange(kind, member, isAgentError(err) ? err.code : 'failed', err instanceof Error ? err.message : String(err));
      throw err;
    }
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
      leaderTransferred: this.leaderTransferred,
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

/** `list` with `member` replaced (or appended when new, or left out when `remove`). */
export function withMember(list: MemberList, member: Member, remove = false): MemberList {
  if (remove) return { ...list, members: list.members.filter((m) => m.id !== member.id) };
  const known = list.members.some((m) => m.id === member.id);
  return { ...list, members: known ? list.members.map((m) => (m.id === member.id ? member : m)) : [...list.members, member] };
}

/**
 * The peer URLs a request means (CONTRACT §3): its own, else the one the peer URL template makes
 * from the name, else none (then the member is matched by name alone).
 */
export function requestedPeerURLs(config: Pick<Config, 'peerUrlTemplate'>, name: string, peerURLs?: string[]): string[] {
  if (peerURLs !== undefined) return peerURLs;
  if (config.peerUrlTemplate === undefined) return [];
  const url = peerUrlFromTemplate(config.peerUrlTemplate, name);
  validatePeerUrl(url);
  return [url];
}

/** Throws `unavailable` unless the voters that answered make a quorum. */
export function requireQuorum(probe: ClusterProbe): void {
  const voters = probe.voters.length;
  const healthy = probe.healthyVoters;
  if (!hasQuorum(voters, healthy)) {
    throw new AgentError(
      'unavailable',
      `only ${healthy} of ${voters} voters answered a status call; a quorum needs ${quorumOf(voters)}`,
      { details: { voters, healthyVoters: healthy, required: quorumOf(voters) } },
    );
  }
}

/** True when `err` (or the etcd error it wraps) satisfies `test`; etcd's own text sits in the cause. */
export function etcdSaid(err: unknown, test: (e: unknown) => boolean): boolean {
  return test(err) || (err instanceof Error && err.cause !== undefined && test(err.cause));
}

/** True when etcd refused a change as "unhealthy cluster" (strict reconfiguration check). */
export function isUnhealthyCluster(err: unknown): boolean {
  return err instanceof Error && err.message.includes('unhealthy cluster');
}

/** How a member is described in messages: its name, else its peer URLs, with its id. */
export function describeMember(member: Member): string {
  const label = member.name !== '' ? member.name : member.peerURLs.join(',');
  return `${label} (${member.id})`;
}
