/**
 * The membership lock's keys under the key prefix, and the reads of them: who holds the lock, and
 * the records of the operations in flight (docs/api.md §4 GET /v1/operations). The lock is taken in
 * lock.ts.
 *
 *   <prefix>lock              → {"operationId", "agent", "incarnation"}
 *   <prefix>operations/<id>   → the OperationRecord (what, which member, which agent, which step)
 *
 * Invariant: reads only, so they work under etcd's NOSPACE alarm, which refuses every put: no lock
 * can be taken then, and one taken before can still be named.
 */
import type { Deadline } from '../lib/deadline';
import type { OperationRecord } from '../proto/types';
import type { EtcdCluster } from './cluster-client';
import { toAgentError } from './errors';
import { LOCK_ATTEMPT_MS } from '../config/timings';

// Why the timing has its value: timings.ts.
const ATTEMPT_MS = LOCK_ATTEMPT_MS;

/** The lock key's value: the operation holding it, and which agent process took it. */
export interface LockValue {
  operationId: string;
  agent: string;
  incarnation: string;
}

/** Who holds the lock: its operation, and that operation's record when it has one. */
export interface LockHolder {
  operationId: string;
  agent: string;
  record?: OperationRecord;
}

/** The lock's key. */
export function lockKey(keyPrefix: string): string {
  return `${keyPrefix}lock`;
}

/** The prefix of the operation records' keys. */
function operationsPrefix(keyPrefix: string): string {
  return `${keyPrefix}operations/`;
}

/** The key of operation `id`'s record. */
export function recordKey(keyPrefix: string, id: string): string {
  return `${operationsPrefix(keyPrefix)}${id}`;
}

/** Membership changes in flight, cluster-wide, oldest first. */
export async function listOperations(
  cluster: Pick<EtcdCluster, 'read'>,
  keyPrefix: string,
  deadline: Deadline,
): Promise<OperationRecord[]> {
  try {
    const values = await cluster.read(
      deadline,
      (raw, at) => raw.getAll().prefix(operationsPrefix(keyPrefix)).options({ deadline: at }).strings(),
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

/**
 * Who holds the lock now: its operation record (or, without one, the lock's own value), or
 * undefined when it is free.
 */
export async function lockHolder(
  cluster: Pick<EtcdCluster, 'read'>,
  keyPrefix: string,
  deadline: Deadline,
): Promise<LockHolder | undefined> {
  let value: string | null;
  try {
    value = await cluster.read(deadline, (raw, at) => raw.get(lockKey(keyPrefix)).options({ deadline: at }).string(), ATTEMPT_MS);
  } catch (err) {
    throw toAgentError(err);
  }
  if (value === null) return undefined;
  const lock = parseJson<LockValue>(value);
  if (lock === undefined) return { operationId: '', agent: '' };
  const record = await readRecord(cluster, keyPrefix, lock.operationId, deadline);
  return { operationId: lock.operationId, agent: lock.agent, ...(record === undefined ? {} : { record }) };
}

/** Operation `id`'s record; undefined when it is gone or cannot be read. */
export async function readRecord(
  cluster: Pick<EtcdCluster, 'read'>,
  keyPrefix: string,
  id: string,
  deadline: Deadline,
): Promise<OperationRecord | undefined> {
  try {
    const value = await cluster.read(
      deadline,
      (raw, at) => raw.get(recordKey(keyPrefix, id)).options({ deadline: at }).string(),
      ATTEMPT_MS,
    );
    return value === null ? undefined : parseJson<OperationRecord>(value);
  } catch {
    return undefined;
  }
}

/** `text` parsed as JSON; undefined when it is not JSON. */
export function parseJson<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}
