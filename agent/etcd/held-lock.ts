/**
 * A taken membership lock (lock.ts takes it): its operation record, kept up to date with the step
 * reached, and its release. Invariant: no step is recorded once the lease behind the lock is lost.
 */
import { Deadline } from '../lib/deadline';
import { AgentError } from '../proto/errors';
import type { OperationRecord } from '../proto/types';
import type { EtcdCluster, GrantedLease } from './cluster-client';
import { toAgentError } from './errors';
import { LEASE_REVOKE_MS, LOCK_ATTEMPT_MS } from '../config/timings';

// Why the timing has its value: timings.ts.
const ATTEMPT_MS = LOCK_ATTEMPT_MS;

/**
 * What an operation records its steps through: a held lock (its operation record in etcd), or,
 * where no lock can be written (etcd's NOSPACE alarm), a record kept by the agent alone.
 */
export interface StepRecorder {
  /** Throws `unavailable` when the right to act is gone (the lock's lease expired), so no change is sent without it. */
  assertHeld(): void;
  /** Records the step reached, before the RPC it names. */
  setStep(step: string, deadline: Deadline): Promise<void>;
}

/** A taken lock: its operation record, `setStep` to say how far the operation got, and `release`. */
export class HeldLock implements StepRecorder {
  private released = false;
  private lost = false;

  constructor(
    /** The MembershipLock that took it, told when it is released. */
    private readonly owner: { forget(held: HeldLock): void },
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

/**
 * Revokes `lease` (3 s at most, whatever the call's deadline); never throws. First through the
 * client that keeps it alive; when that endpoint is gone, its keep-alive is stopped and the revoke
 * goes to any other endpoint, so a lock is not left to its TTL because one member died.
 */
export async function revokeQuietly(cluster: EtcdCluster, granted: GrantedLease | undefined): Promise<void> {
  if (granted === undefined) return;
  const { lease, id, unpin } = granted;
  const deadline = Deadline.in(LEASE_REVOKE_MS);
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
