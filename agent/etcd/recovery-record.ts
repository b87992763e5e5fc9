/**
 * The record a recovery leaves in the recovered cluster, `<key prefix>recovery`: how a repeated
 * POST /v1/recovery answers what was done, and how a survivor's agent learns that its member was
 * removed by a recovery (and must rejoin), rather than by a scale-in.
 */
import type { Deadline } from '../lib/deadline';
import type { RecoveryRecord } from '../proto/recovery';
import type { EtcdCluster } from './cluster-client';

function keyOf(prefix: string): string {
  return `${prefix}recovery`;
}

/** The cluster's recovery record (a linearizable read through a quorum), or undefined when it has none. */
export async function readRecoveryRecord(cluster: EtcdCluster, prefix: string, deadline: Deadline): Promise<RecoveryRecord | undefined> {
  const text = await cluster.read(deadline, (client, at) => client.get(keyOf(prefix)).options({ deadline: at }).string());
  if (text === null) return undefined;
  try {
    return JSON.parse(text) as RecoveryRecord;
  } catch {
    return undefined;
  }
}

/** Writes the record (a put: repeating it is harmless). */
export async function writeRecoveryRecord(cluster: EtcdCluster, prefix: string, record: RecoveryRecord, deadline: Deadline): Promise<void> {
  await cluster.write(deadline, (client, at) => client.put(keyOf(prefix)).value(JSON.stringify(record)).options({ deadline: at }).exec());
}
