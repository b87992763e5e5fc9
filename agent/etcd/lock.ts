/**
 * The cluster-wide membership lock and the operation records beside it
 * (docs/api.md §4 GET /v1/operations). Both keys live under the key prefix and are
 * bound to one lease, kept alive while the lock is held: when an agent dies,
 * its lock and its record expire with the lease, so nobody waits forever.
 * Every call goes through the cluster client's fail-over (any live endpoint,
 * configured or reported), so a dead member beside the agent does not block it.
 * A taken lock is a HeldLock (held-lock.ts); the keys, and the reads of who
 * holds the lock and of the records, are in operation-records.ts.
 */
import { randomUUID } from 'node:crypto';
import type { Deadline } from '../lib/deadline';
import { pollUntil } from '../lib/poll';
import { AgentError } from '../proto/errors';
import type { OperationAction, OperationRecord } from '../proto/types';
import type { Logger } from '../observability/logger';
import type { EtcdCluster, GrantedLease } from './cluster-client';
import { isTransient, toAgentError } from './errors';
import { HeldLock, revokeQuietly } from './held-lock';
import { LockHolder, lockHolder, lockKey, LockValue, listOperations, parseJson, readRecord, recordKey } from './operation-records';
import { LOCK_ATTEMPT_MS, LOCK_MAX_WAIT_MS, LOCK_POLL_MS, LOCK_RESERVE_MS, LOCK_TTL_SECONDS } from '../config/timings';

/** How the lock behaves; the defaults suit production. */
export interface MembershipLockOptions {
  /** `ETCD_AGENT_KEY_PREFIX`, ending in "/". */
  keyPrefix: string;
  /** This agent's member name, written into records and used to recognise this pod's previous incarnation. */
  agent: string;
  logger: Logger;
  /** Lease TTL: how long a dead agent's lock outlives it. */
  ttlSeconds?: number;
  /** Longest wait for a lock held by someone else (docs/api.md §4: 5 s). */
  maxWaitMs?: number;
  /** Interval between attempts while the lock is held by someone else. */
  pollMs?: number;
}

/** What an operation is about to do, recorded before it does it. */
export interface OperationIntent {
  action: OperationAction;
  member: { name: string; peerURLs: string[] };
}

/** What the tries of one `acquire` carry from one to the next. */
interface AcquireState {
  granted?: GrantedLease;
  lastHolder?: OperationRecord | LockValue;
  lastError?: unknown;
}

// Why each timing has its value: timings.ts.
const RESERVE_MS = LOCK_RESERVE_MS;
const ATTEMPT_MS = LOCK_ATTEMPT_MS;

/** Takes and lists the cluster's membership lock; one per agent. */
export class MembershipLock {
  /** Distinguishes this process from an earlier (crashed) agent of the same pod. */
  readonly incarnation = randomUUID();
  private readonly held = new Set<HeldLock>();
  private readonly ttlSeconds: number;
  private readonly maxWaitMs: number;
  private readonly pollMs: number;

  constructor(
    private readonly cluster: EtcdCluster,
    private readonly options: MembershipLockOptions,
  ) {
    this.ttlSeconds = options.ttlSeconds ?? LOCK_TTL_SECONDS;
    this.maxWaitMs = options.maxWaitMs ?? LOCK_MAX_WAIT_MS;
    this.pollMs = options.pollMs ?? LOCK_POLL_MS;
  }

  private get lockKey(): string {
    return lockKey(this.options.keyPrefix);
  }

  /**
   * Takes the lock and records `intent`. Waits for a lock held by another agent up to 5 s (less when
   * the deadline is nearer, keeping time for the work itself), then throws `busy`.
   */
  async acquire(intent: OperationIntent, deadline: Deadline): Promise<HeldLock> {
    const { cluster } = this;
    const record: OperationRecord = {
      id: randomUUID(),
      action: intent.action,
      member: { name: intent.member.name, peerURLs: [...intent.member.peerURLs] },
      agent: this.options.agent,
      startedAt: new Date().toISOString(),
      step: 'locked',
    };
    const value: LockValue = { operationId: record.id, agent: this.options.agent, incarnation: this.incarnation };
    const waitUntil = Date.now() + Math.min(this.maxWaitMs, Math.max(0, deadline.remainingMs() - RESERVE_MS));

    const state: AcquireState = {};
    try {
      // A takeover of our own dead operation's lock is tried again at once, without a pause.
      const held = await pollUntil({ until: waitUntil, pauseMs: this.pollMs }, async () => {
        // A deadline cut short (the quorum gate gave up on this call) ends the wait too.
        deadline.check('waiting for the membership lock');
        for (;;) {
          const outcome = await this.attempt(record, value, deadline, state);
          if (outcome !== 'taken-over') return outcome;
        }
      });
      if (held !== undefined) return held;
    } catch (err) {
      await revokeQuietly(cluster, state.granted);
      throw err;
    }
    await revokeQuietly(cluster, state.granted);
    if (state.lastHolder === undefined && state.lastError !== undefined) throw toAgentError(state.lastError);
    throw busyError(state.lastHolder);
  }

  /**
   * One try at the lock: the create-if-absent transaction, with our lease. Answers the held lock,
   * `taken-over` when it removed a lock of our own dead operation (try again at once), or undefined
   * when another operation holds it or etcd failed transiently (`state` says which).
   */
  private async attempt(
    record: OperationRecord,
    value: LockValue,
    deadline: Deadline,
    state: AcquireState,
  ): Promise<HeldLock | 'taken-over' | undefined> {
    const { cluster } = this;
    try {
      if (state.granted === undefined || state.granted.lease.revoked()) {
        state.granted?.unpin();
        // A lost lease is seen by the next txn failing (and by HeldLock once held).
        state.granted = await cluster.grantLease(this.ttlSeconds, deadline, ATTEMPT_MS);
      }
      const granted = state.granted;
      const { id } = granted;
      // Safe to repeat on another endpoint: a create-if-absent whose first answer was lost finds our own value.
      const result = await cluster.write(
        deadline,
        (raw, at) =>
          raw
            .if(this.lockKey, 'Create', '==', 0)
            .then(
              raw.put(this.lockKey).value(JSON.stringify(value)).lease(id),
              raw.put(this.recordKey(record.id)).value(JSON.stringify(record)).lease(id),
            )
            .else(raw.get(this.lockKey))
            .options({ deadline: at })
            .commit(),
        ATTEMPT_MS,
      );
      if (result.succeeded) {
        const held = new HeldLock(this, cluster, granted, record, this.recordKey(record.id));
        this.held.add(held);
        return held;
      }
      const kv = result.responses[0]?.response_range?.kvs[0];
      if (kv !== undefined) {
        const holder = parseJson<LockValue>(kv.value.toString());
        state.lastHolder = holder;
        if (holder?.operationId === record.id) {
          // Our own put went through but its answer was lost: the lock is ours.
          const held = new HeldLock(this, cluster, granted, record, this.recordKey(record.id));
          this.held.add(held);
          return held;
        }
        if (holder !== undefined && holder.agent === this.options.agent && !this.isRunning(holder)) {
          // The lock carries our name but no operation this process is running: it belongs to this
          // pod's previous agent, which crashed (one agent runs per pod, so an agent with our name
          // and another incarnation is dead), or to an operation of ours whose release could not
          // reach etcd (e.g. while quorum was lost). Waiting for its lease TTL would only delay the
          // retry a controller makes after the crash; revoking its lease removes lock and record
          // now. What the dead operation left half done is found by reading the member list.
          await cluster
            .write(deadline, (raw, at) => raw.leaseClient.leaseRevoke({ ID: kv.lease }, { deadline: at }), ATTEMPT_MS)
            .catch((err: unknown) => {
              if (!isLeaseGone(err) && !isLeaseGone(toAgentError(err).cause)) throw err; // already expired: the lock is free anyway
            });
          this.options.logger.warn('took over a membership lock left by a dead operation of this agent', {
            operationId: holder.operationId,
            agent: holder.agent,
          });
          return 'taken-over';
        }
        if (holder !== undefined) {
          state.lastHolder = (await this.readRecord(holder.operationId, deadline)) ?? holder;
        }
      }
    } catch (err) {
      if (!isTransient(err) && !isLeaseGone(err)) throw toAgentError(err);
      state.lastError = err;
      if (isLeaseGone(err) || isLeaseGone(toAgentError(err).cause)) {
        void revokeQuietly(cluster, state.granted);
        state.granted = undefined;
      }
    }
    return undefined;
  }

  /** Membership changes in flight, cluster-wide, oldest first. */
  listOperations(deadline: Deadline): Promise<OperationRecord[]> {
    return listOperations(this.cluster, this.options.keyPrefix, deadline);
  }

  /**
   * Who holds the lock now: its operation record (or, without one, the lock's own value), or
   * undefined when it is free. A read: it works under etcd's NOSPACE alarm, which refuses every put,
   * so no lock can be taken then and one taken before is still there.
   */
  holder(deadline: Deadline): Promise<LockHolder | undefined> {
    return lockHolder(this.cluster, this.options.keyPrefix, deadline);
  }

  /** True when `holder` is an operation this very process is running now. */
  private isRunning(holder: LockValue): boolean {
    if (holder.incarnation !== this.incarnation) return false;
    return [...this.held].some((h) => h.record.id === holder.operationId);
  }

  /** Releases every lock this agent still holds (shutdown). */
  async releaseAll(): Promise<void> {
    await Promise.all([...this.held].map((h) => h.release()));
  }

  /** @internal Called by HeldLock.release. */
  forget(held: HeldLock): void {
    this.held.delete(held);
  }

  private recordKey(id: string): string {
    return recordKey(this.options.keyPrefix, id);
  }

  private readRecord(id: string, deadline: Deadline): Promise<OperationRecord | undefined> {
    return readRecord(this.cluster, this.options.keyPrefix, id, deadline);
  }
}

function busyError(holder: OperationRecord | LockValue | undefined): AgentError {
  if (holder !== undefined && 'action' in holder) {
    return new AgentError(
      'busy',
      `another membership change holds the cluster lock: ${holder.action} of ${holder.member.name || holder.member.peerURLs.join(',')} by agent ${holder.agent} (step ${holder.step})`,
      { details: { operation: holder } },
    );
  }
  return new AgentError('busy', 'another membership change holds the cluster lock', {
    details: holder === undefined ? {} : { operation: holder },
  });
}

function isLeaseGone(err: unknown): boolean {
  return err instanceof Error && /lease not found|lease.*(expired|invalid)/i.test(err.message + err.name);
}
