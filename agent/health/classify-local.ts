/**
 * This pod's own member as `/v1/health/local` shows it (docs/api.md §4). Pure: one status answer and
 * the cluster observation beside it go in; ready only when membership and sync are confirmed.
 */
import { isLearnerInSync } from '../membership/quorum';
import { statusNumbers } from './classify';
import { learnerLag } from './lag';
import { readRole } from './role';
import type { ClusterHealth, LocalHealth, ObservedFacts, StatusProbe } from './types';

/** How `/v1/health/local` judges a learner. */
export interface LocalOptions {
  /**
   * False for `?voter=true`, the etcd container's readiness probe: a learner is never ready there,
   * in sync or not, since it serves no client request (as etcd's own /readyz says from 3.5.19).
   */
  learnerReady?: boolean;
}

/** Why a learner is not ready under `?voter=true`. */
export const LEARNER_NOT_READY =
  'a learner serves no client requests (etcd refuses them, from 3.6 with a code clients do not fail over from): ready once promoted to a voter';

/**
 * This pod's member (docs/api.md §4 `/v1/health/local`): ready when its own endpoint answered, it is
 * in the member list read in this observation, and, as a learner, it is in sync with the leader
 * (with `learnerReady: false`, never as a learner). `cluster` is undefined when no cluster
 * observation finished in time.
 */
export function classifyLocal(
  probe: StatusProbe,
  observation: { facts: ObservedFacts; health: ClusterHealth } | undefined,
  memberName: string,
  options: LocalOptions = {},
): LocalHealth {
  const list = observation?.facts.memberList;
  const status = probe.status;
  const listed =
    status !== undefined
      ? list?.members.find((m) => m.id === status.memberId)
      : list?.members.find((m) => m.started && m.name === memberName);
  const id = status?.memberId ?? listed?.id ?? '';
  const isLearner = listed?.isLearner ?? status?.isLearner ?? false;
  // The role by the agent's one rule, as role.ts reads it (shared with roleProbe and GET /v1/role).
  const reading = readRole(probe, observation);
  const role = reading.kind === 'role' ? reading.role : null;
  const member = {
    id,
    name: listed?.name ?? memberName,
    isLearner,
    started: listed?.started ?? status !== undefined,
    reachable: status !== undefined,
    isLeader: role === 'leader',
    ...statusNumbers(status),
    errors: [...(status?.errors ?? [])],
    // A fact, not error text: listed in the observed member list, not listed, or no list observed.
    listed: list === undefined ? null : status === undefined ? listed !== undefined || null : listed !== undefined,
  };
  if (status === undefined) {
    // The etcd container's start script refused to start etcd, and said why (health/start-note.ts).
    const note = observation?.facts.startNote?.text;
    if (note !== undefined) member.errors.push(note);
    member.errors.push(`${probe.url} did not answer: ${probe.error ?? 'no answer'}`);
    return { ready: false, member: { ...member, role: null }, reading };
  }
  const local = { ...member, role };
  const fail = (why: string): LocalHealth => ({ ready: false, member: { ...local, errors: [...local.errors, why] }, reading });
  if (observation === undefined || list === undefined) {
    return fail('the member list could not be read in time, so membership is not confirmed');
  }
  if (listed === undefined) return fail(`member ${status.memberId} is not in the member list`);
  if (!list.fresh) return fail('the member list could not be read in this observation, so membership is not confirmed');
  if (role === 'learner' && options.learnerReady === false) return fail(LEARNER_NOT_READY);
  if (role === 'learner') {
    const leader = observation.health.members.find((m) => m.isLeader && m.reachable);
    if (leader?.raftIndex === null || leader?.raftIndex === undefined) {
      return fail('the leader did not answer, so it is not known whether this learner is in sync');
    }
    if (!isLearnerInSync(status.raftIndex, leader.raftIndex)) {
      return fail(learnerLag(status.raftIndex, leader.raftIndex));
    }
  }
  return { ready: true, member: local, reading };
}
