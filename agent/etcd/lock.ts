/**
 * The cluster-wide membership lock and the operation records beside it
 * (CONTRACT §4 GET /v1/operations). Both keys live under the key prefix and are
 * bound to one lease, kept alive while the lock is held: when an agent dies,
 * its lock and its record expire with the lease, so nobody waits forever.
 *
 *   <prefix>lock              → {"operationId", "agent", "incarnation"}
 *   <prefix>operations/<id>   → the OperationRecord (what, which member, which agent, which step)
 */
import { randomUUID } from 'node:crypto';
import pRetry from 'p-retry';
import type { Etcd3, Lease } from 'etcd3';
import { Deadline, delay } from '../deadline';
import { AgentError } from '../proto/errors';
import type { ActionName, OperationRecord } from '../proto/types';
import type { Logger } from '../observability/logger';
import type { EtcdCluster } from './cluster-client';
import { isTransient, retryTransient, toAgentError } from './errors';
import type { Unpin } from './retiring-clients';
import { LEASE_REVOKE_MS, LOCK_ATTEMPT_MS, LOCK_MAX_WAIT_MS, LOCK_POLL_MS, LOCK_RESERVE_MS, LOCK_RETRY, LOCK_TTL_SECONDS } from '../timings';

/** How the lock behaves; the defaults suit production. */
export interface MembershipLockOptions {
  /** `ETCD_AGENT_KEY_PREFIX`, ending in "/". */
  keyPrefix: string;
  /** This agent's member name, written into records and used to recognise this pod's previous incarnation. */
  agent: string;
  logger: Logger;
  /** Lease TTL: how long a dead agent's lock outlives it. */
  ttlSeconds?: number;
  /** Longest wait for a lock held by someone else (CONTRACT §4: 5 s). */
  maxWaitMs?: number;
  /** Interval between attempts while the lock is held by someone else. */
  pollMs?: number;
}

/** What an operation is about to do, recorded before it does it. */
export interface OperationIntent {
  action: ActionName;
  member: { name: string; peerURLs: string[] };
}

interface LockValue {
  operationId: string;
  agent: string;
  incarnation: string;
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
    return `${this.options.keyPrefix}lock`;
  }

  private get operationsPrefix(): string {
    return `${this.options.keyPrefix}operations/`;
  }

  /**
   * Takes the lock and records `intent`. Waits for a lock held by another agent up to 5 s (less when
   * the deadline is nearer, keeping time for the work itself), then throws `busy`.
   */
  async acquire(intent: OperationIntent, deadline: Deadline): Promise<HeldLock> {
    // The lease lives on this client: pinned, a rotation of the etcd credentials does not close it
    // under the lock; released with the lock, or below when no lock is taken.
    const { client: raw, unpin } = this.cluster.pinRaw();
    try {
      return await this.acquireOn(raw, unpin, intent, deadline);
    } catch (err) {
      unpin();
      throw err;
    }
  }

  /** `acquire` on one client, whose pin the returned lock takes over. */
  private async acquireOn(raw: Etcd3, unpin: Unpin, intent: OperationIntent, deadline: Deadline): Promise<HeldLock> {
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

    let lease: Lease | undefined;
    let lastHolder: OperationRecord | LockValue | undefined;
    let lastError: unknown;
    try {
      for (;;) {
        try {
          if (lease === undefined || lease.revoked()) {
            lease = raw.lease(this.ttlSeconds, { deadline: deadline.capped(ATTEMPT_MS) });
            // A lost lease is seen by the next txn failing (and by HeldLock once held); nothing to do here.
            lease.on('lost', () => undefined);
          }
          const leaseId = await lease.grant();
          const result = await raw
            .if(this.lockKey, 'Create', '==', 0)
            .then(
              raw.put(this.lockKey).value(JSON.stringify(value)).lease(leaseId),
              raw.put(this.recordKey(record.id)).value(JSON.stringify(record)).lease(leaseId),
            )
            .else(raw.get(this.lockKey))
            .options({ deadline: deadline.capped(ATTEMPT_MS) })
            .commit();
          if (result.succeeded) {
            const held = new HeldLock(this, raw, lease, leaseId, record, this.recordKey(record.id), unpin);
            this.held.add(held);
            return held;
          }
          const kv = result.responses[0]?.response_range?.kvs[0];
          if (kv !== undefined) {
            const holder = parseJson<LockValue>(kv.value.toString());
            lastHolder = holder;
            if (holder?.operationId === record.id) {
              // Our own put went through but its answer was lost: the lock is ours.
              const held = new HeldLock(this, raw, lease, leaseId, record, this.recordKey(record.id), unpin);
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
              await raw.leaseClient.leaseRevoke({ ID: kv.lease }, { deadline: deadline.capped(ATTEMPT_MS) }).catch((err: unknown) => {
                if (!isLeaseGone(err)) throw err; // already expired: the lock is free anyway
              });
              this.options.logger.warn('took over a membership lock left by a dead operation of this agent', {
                operationId: holder.operationId,
                agent: holder.agent,
              });
              continue;
            }
            if (holder !== undefined) {
              lastHolder = (await this.readRecord(holder.operationId, deadline)) ?? holder;
            }
          }
        } catch (err) {
          if (!isTransient(err) && !isLeaseGone(err)) throw toAgentError(err);
          lastError = err;
          if (isLeaseGone(err)) {
            await revokeQuietly(lease);
            lease = undefined;
          }
        }
        if (Date.now() + this.pollMs > waitUntil) break;
        await delay(this.pollMs);
      }
    } catch (err) {
      await revokeQuietly(lease);
      throw err;
    }
    await revokeQuietly(lease);
    if (lastHolder === undefined && lastError !== undefined) throw toAgentError(lastError);
    throw busyError(lastHolder);
  }

  /** Membership changes in flight, cluster-wide, oldest first. */
  async listOperations(deadline: Deadline): Promise<OperationRecord[]> {
    try {
      const values = await pRetry(
        () => this.cluster.raw.getAll().prefix(this.operationsPrefix).options({ deadline: deadline.capped(ATTEMPT_MS) }).strings(),
        retryTransient(deadline, LOCK_RETRY),
      );
      return Object.values(values)
        .map((v) => parseJson<OperationRecord>(v))
        .filter((r): r is OperationRecord => r !== undefined && typeof r.id === 'string')
        .sort((a, b) => a.startedAt.localeCompare(b.startedAt));
    } catch (err) {
      throw toAgentError(err);
    }
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
    return `${this.operationsPrefix}${id}`;
  }

  private async readRecord(id: string, deadline: Deadline): Promise<OperationRecord | undefined> {
    try {
      const value = await this.cluster.raw.get(this.recordKey(id)).options({ deadline: deadline.capped(ATTEMPT_MS) }).string();
      return value === null ? undefined : parseJson<OperationRecord>(value);
    } catch {
      return undefined;
    }
  }
}

/** A taken lock: its operation record, `setStep` to say how far the operation got, and `release`. */
export class HeldLock {
  private released = false;
  private lost = false;

  constructor(
    private readonly owner: MembershipLock,
    private readonly raw: Etcd3,
    private readonly lease: Lease,
    private readonly leaseId: string,
    readonly record: OperationRecord,
    private readonly key: string,
    private readonly unpin: Unpin = () => undefined,
  ) {
    lease.on('lost', () => {
      this.lost = true;
    });
  }

  /** Throws `unavailable` when the lease behind the lock is gone, so no change is sent without the lock. */
  assertHeld(): void {
    if (this.released || this.lost || this.lease.revoked()) {
      throw new AgentError('unavailable', 'the membership lock was lost (its lease expired); call again', {
        details: { operation: this.record.id },
      });
    }
  }

  /** Records the step reached (before an RPC, so a record never claims less than was tried). */
  async setStep(step: string, deadline: Deadline): Promise<void> {
    this.assertHeld();
    this.record.step = step;
    try {
      await pRetry(
        // Through the client, not `lease.put`: etcd3's lease wrapper drops the call options, deadline included.
        () => this.raw.put(this.key).value(JSON.stringify(this.record)).lease(this.leaseId).options({ deadline: deadline.capped(ATTEMPT_MS) }).exec(),
        retryTransient(deadline, LOCK_RETRY),
      );
    } catch (err) {
      throw toAgentError(err);
    }
  }

  /** Revokes the lease, which removes the lock and the record; never throws. */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    this.owner.forget(this);
    await revokeQuietly(this.lease);
    this.unpin();
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

/** Revokes `lease` (a few quick attempts, 3 s at most, whatever the call's deadline); never throws. */
async function revokeQuietly(lease: Lease | undefined): Promise<void> {
  if (lease === undefined) return;
  const deadline = Deadline.in(LEASE_REVOKE_MS);
  try {
    await pRetry(() => lease.revoke({ deadline: deadline.capped(ATTEMPT_MS) }), retryTransient(deadline, LOCK_RETRY));
  } catch {
    // It expires by itself within its TTL, and a later acquire by this agent takes it over.
  }
}

function parseJson<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}
