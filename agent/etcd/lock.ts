/**
 * The cluster-wide membership lock and the operation records beside it
 * (CONTRACT §4 GET /v1/operations). Both keys live under the key prefix and are
 * bound to one lease, kept alive while the lock is held: when an agent dies,
 * its lock and its record expire with the lease, so nobody waits forever.
 * Every call goes through the cluster client's fail-over (any live endpoint,
 * configured or reported), so a dead member beside the agent does not block it.
 *
 *   <prefix>lock              → {"operationId", "agent", "incarnation"}
 *   <prefix>operations/<id>   → the OperationRecord (what, which member, which agent, which step)
 */
import { randomUUID } from 'node:crypto';
import { Deadline, delay } from '../deadline';
import { AgentError } from '../proto/errors';
import type { ActionName, OperationRecord } from '../proto/types';
import type { Logger } from '../observability/logger';
import type { EtcdCluster, GrantedLease } from './cluster-client';
import { isTransient, toAgentError } from './errors';

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

/** Time kept back from the call's deadline for the work done under the lock. */
const RESERVE_MS = 1000;
/**
 * Longest single attempt of a lock call. Each call goes to one endpoint; a frozen member (SIGSTOP,
 * a hung node) accepts the connection and never answers, so a short attempt followed by another
 * (on another endpoint) beats one long wait. A lock call on a working etcd takes milliseconds.
 */
const ATTEMPT_MS = 1000;

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
    this.ttlSeconds = options.ttlSeconds ?? 10;
    this.maxWaitMs = options.maxWaitMs ?? 5000;
    this.pollMs = options.pollMs ?? 100;
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

    let granted: GrantedLease | undefined;
    let lastHolder: OperationRecord | LockValue | undefined;
    let lastError: unknown;
    try {
      for (;;) {
        try {
          if (granted === undefined || granted.lease.revoked()) {
            granted?.unpin();
            // A lost lease is seen by the next txn failing (and by HeldLock once held).
            granted = await cluster.grantLease(this.ttlSeconds, deadline, ATTEMPT_MS);
          }
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
            lastHolder = holder;
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
              continue;
            }
            if (holder !== undefined) {
              lastHolder = (await this.readRecord(holder.operationId, deadline)) ?? holder;
            }
          }
        } catch (err) {
          if (!isTransient(err) && !isLeaseGone(err)) throw toAgentError(err);
          lastError = err;
          if (isLeaseGone(err) || isLeaseGone(toAgentError(err).cause)) {
            void revokeQuietly(cluster, granted);
            granted = undefined;
          }
        }
        if (Date.now() + this.pollMs > waitUntil) break;
        await delay(this.pollMs);
      }
    } catch (err) {
      await revokeQuietly(cluster, granted);
      throw err;
    }
    await revokeQuietly(cluster, granted);
    if (lastHolder === undefined && lastError !== undefined) throw toAgentError(lastError);
    throw busyError(lastHolder);
  }

  /** Membership changes in flight, cluster-wide, oldest first. */
  async listOperations(deadline: Deadline): Promise<OperationRecord[]> {
    try {
      const values = await this.cluster.read(
        deadline,
        (raw, at) => raw.getAll().prefix(this.operationsPrefix).options({ deadline: at }).strings(),
        ATTEMPT_MS,
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
      const value = await this.cluster.read(deadline, (raw, at) => raw.get(this.recordKey(id)).options({ deadline: at }).string(), ATTEMPT_MS);
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
    private readonly cluster: EtcdCluster,
    private readonly granted: GrantedLease,
    readonly record: OperationRecord,
    private readonly key: string,
  ) {
    granted.lease.on('lost', () => {
      this.lost = true;
    });
  }

  /** Throws `unavailable` when the lease behind the lock is gone, so no change is sent without the lock. */
  assertHeld(): void {
    if (this.released || this.lost || this.granted.lease.revoked()) {
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
      // Through the client, not `lease.put`: etcd3's lease wrapper drops the call options, deadline included.
      await this.cluster.write(
        deadline,
        (raw, at) => raw.put(this.key).value(JSON.stringify(this.record)).lease(this.granted.id).options({ deadline: at }).exec(),
        ATTEMPT_MS,
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
    await revokeQuietly(this.cluster, this.granted);
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

/**
 * Revokes `lease` (3 s at most, whatever the call's deadline); never throws. First through the
 * client that keeps it alive; when that endpoint is gone, its keep-alive is stopped and the revoke
 * goes to any other endpoint, so a lock is not left to its TTL because one member died.
 */
async function revokeQuietly(cluster: EtcdCluster, granted: GrantedLease | undefined): Promise<void> {
  if (granted === undefined) return;
  const { lease, id, unpin } = granted;
  const deadline = Deadline.in(3000);
  try {
    await lease.revoke({ deadline: deadline.capped(ATTEMPT_MS) });
    return;
  } catch {
    lease.release();
  } finally {
    // Revoked or given up: the lease no longer needs the client it lives on kept open.
    unpin();
  }
  try {
    await cluster.write(deadline, (raw, at) => raw.leaseClient.leaseRevoke({ ID: id }, { deadline: at }), ATTEMPT_MS);
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
