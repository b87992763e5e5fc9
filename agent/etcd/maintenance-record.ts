/**
 * The record a defragmentation run keeps in etcd, `<prefix>maintenance/defragment`: which run, by
 * which agent, what it did so far and how it ended. Not bound to a lease: it outlives the agent, so
 * the next call can say what an earlier run did, and continue one that stopped. A plain put, so etcd
 * refuses it under NOSPACE: a run then keeps it in memory and writes it once the alarm is disarmed.
 */
import type { Deadline } from '../lib/deadline';
import type { DefragmentRecord } from '../proto/maintenance';
import type { EtcdCluster } from './cluster-client';
import { toAgentError } from './errors';

/** The record's key under the key prefix. */
export function defragRecordKey(keyPrefix: string): string {
  return `${keyPrefix}maintenance/defragment`;
}

/** The last run's record, or undefined when there is none (or it does not parse). */
export async function readDefragRecord(cluster: EtcdCluster, keyPrefix: string, deadline: Deadline): Promise<DefragmentRecord | undefined> {
  let text: string | null;
  try {
    text = await cluster.read(deadline, (raw, at) => raw.get(defragRecordKey(keyPrefix)).options({ deadline: at }).string());
  } catch (err) {
    throw toAgentError(err);
  }
  if (text === null) return undefined;
  try {
    const record = JSON.parse(text) as DefragmentRecord;
    return typeof record.id === 'string' && Array.isArray(record.members) ? record : undefined;
  } catch {
    return undefined;
  }
}

/** Writes the run's record (a put; repeatable). Throws the mapped etcd error (NOSPACE included). */
export async function writeDefragRecord(
  cluster: EtcdCluster,
  keyPrefix: string,
  record: DefragmentRecord,
  deadline: Deadline,
): Promise<void> {
  try {
    await cluster.write(deadline, (raw, at) =>
      raw.put(defragRecordKey(keyPrefix)).value(JSON.stringify(record)).options({ deadline: at }).exec(),
    );
  } catch (err) {
    throw toAgentError(err);
  }
}
