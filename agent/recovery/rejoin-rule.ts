/**
 * Whether this pod's member must rejoin after a recovery, by a pure rule: the cluster that answers
 * keeps a recovery record of the same cluster id as this member's data directory, the record names
 * this member among the members it removed, and this member is not the one recovered from.
 *
 * Invariant: a member rejoins (its data moved aside, joined again as a learner) only on a record that
 * names it as removed; a member of another cluster, the recovered member itself, a member the record
 * does not name, or a member whose own etcd still knows a leader is left alone.
 */
import type { RecoveryRecord } from '../proto/recovery';

/** What the rule looks at: the member in this pod's data directory, its etcd's leader, and the record. */
export interface RejoinFacts {
  /** The member the data directory holds (its WAL's metadata), or undefined when it holds none. */
  dataDir: { memberId: string; clusterId: string } | undefined;
  /** The leader this member's etcd names ('0': none); undefined when its etcd does not answer. */
  leaderId: string | undefined;
  /** The recovery record the answering cluster keeps, if any. */
  record: Pick<RecoveryRecord, 'clusterId' | 'from' | 'removed'> | undefined;
}

/** True when this pod's member was removed by the recorded recovery and must rejoin. */
export function mustRejoin(f: RejoinFacts): boolean {
  if (f.dataDir === undefined || f.record === undefined) return false;
  if (f.leaderId !== undefined && f.leaderId !== '0') return false;
  if (f.record.clusterId !== f.dataDir.clusterId || f.record.from.id === f.dataDir.memberId) return false;
  return f.record.removed.some((r) => r.id === f.dataDir?.memberId);
}
