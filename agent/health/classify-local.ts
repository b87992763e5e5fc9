/**
 * This pod's own member as `/v1/health/local` shows it (CONTRACT §4). Pure: one status answer and
 * the cluster observation beside it go in; ready only when membership and sync are confirmed.
 */
import { roleOf } from '../membership/leader';
import { isLearnerInSync } from '../membership/quorum';
import { statusNumbers } from './classify';
import { learnerLag } from './lag';
import type { ClusterHealth, LocalHealth, ObservedFacts, StatusProbe } from './types';

/**
 * This pod's member (CONTRACT §4 `/v1/health/local`): ready when its own endpoint answered, it is
 * in the member list read in this observation, and, as a learner, it is in sync with the leader.
 * `cluster` is undefined when no cluster observation finished in time.
 */
export function classifyLocal(
  probe: StatusProbe,
  observation: { facts: ObservedFacts; health: ClusterHealth } | undefined,
  memberName: string,
): LocalHealth {
  const list = observation?.facts.memberList;
  const status = probe.status;
  const listed =
    status !== undefined
      ? list?.members.find((m) => m.id === status.memberId)
      : list?.members.find((m) => m.started && m.name === memberName);
  const id = status?.memberId ?? listed?.id ?? '';
  const isLearner = listed?.isLearner ?? status?.isLearner ?? false;
  // The leader by the agent's one rule (a quorum's view), as the cluster observation names it.
  const role = roleOf({ id, isLearner }, observation?.health.leader?.id);
  const member = {
    id,
    name: listed?.name ?? memberName,
    isLearner,
    started: listed?.started ?? status !== undefined,
    reachable: status !== undefined,
    isLeader: status !== undefined && role === 'leader',
    ...statusNumbers(status),
    errors: [...(status?.errors ?? [])],
  };
  if (status === undefined) {
    // The etcd container's start script refused to start etcd, and said why (health/start-note.ts).
    const note = observation?.facts.startNote?.text;
    if (note !== undefined) member.errors.push(note);
    member.errors.push(`${probe.url} did not answer: ${probe.error ?? 'no answer'}`);
    return { ready: false, member: { ...member, role: null } };
  }
  const local = { ...member, role };
  const fail = (why: string): LocalHealth => ({ ready: false, member: { ...local, errors: [...local.errors, why] } });
  if (observation === undefined || list === undefined) {
    return fail('the member list could not be read in time, so membership is not confirmed');
  }
  if (listed === undefined) return fail(`member ${status.memberId} is not in the member list`);
  if (!list.fresh) return fail('the member list could not be read in this observation, so membership is not confirmed');
  if (role === 'learner') {
    const leader = observation.health.members.find((m) => m.isLeader && m.reachable);
    if (leader?.raftIndex === null || leader?.raftIndex === undefined) {
      return fail('the leader did not answer, so it is not known whether this learner is in sync');
    }
    if (!isLearnerInSync(status.raftIndex, leader.raftIndex)) {
      return fail(learnerLag(status.raftIndex, leader.raftIndex));
    }
  }
  return { ready: true, member: local };
}
