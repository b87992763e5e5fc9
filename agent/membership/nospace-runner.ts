/**
 * Who defragments the cluster while etcd's NOSPACE alarm is raised. Pure.
 *
 * Under NOSPACE etcd refuses every put and every lease grant, so the membership lock (a put bound
 * to a lease) cannot be taken, and no record can be written. Deletes, compactions, defragmentations
 * and alarm disarms still work. What keeps two agents from defragmenting at once then is this rule:
 * only the agent of the started voter with the lowest member id runs the maintenance. Every agent
 * computes the same answer from the same member list (which no agent can change under NOSPACE: a
 * join or a leave needs the lock), an agent is named after its own member (one agent per pod), and
 * that agent runs one maintenance run at a time. So at most one process defragments. A lock taken
 * before the alarm is still visible (a read), and the runner waits for it to be released.
 */
import type { Member } from '../proto/types';

/** The started voter with the lowest id (numerically, as etcd's uint64), or undefined when there is none. */
export function noSpaceRunner(members: readonly Member[]): Member | undefined {
  let runner: Member | undefined;
  for (const m of members) {
    if (!m.started || m.isLearner) continue;
    if (runner === undefined || BigInt(`0x${m.id}`) < BigInt(`0x${runner.id}`)) runner = m;
  }
  return runner;
}
