/**
 * The plan GET /v1/recovery answers: which members answer and how far their logs reach, how long
 * this agent has seen the quorum lost, the most advanced survivor, and what a recovery from it keeps
 * and drops — or why none is needed or possible. Pure: built from the same facts as the decision,
 * by running the decision for the call the plan proposes.
 */
import type { RecoveryPlan } from '../proto/recovery';
import { mostAdvanced } from './candidate';
import { decideRecovery, RecoveryFacts, shownLossSeconds } from './decision';

/** What the plan needs beyond the decision's facts. */
export interface PlanFacts extends Omit<RecoveryFacts, 'request'> {
  /** Where each member's agent listens (`http://host:port`), for the proposed call. */
  agentOf: (name: string) => string | null;
}

/** Builds the plan (see the module comment). */
export function buildPlan(f: PlanFacts): RecoveryPlan {
  const ids = [...new Set(f.members.map((m) => m.clusterId).filter((id): id is string => id !== null))];
  const lostForSeconds = f.lostSinceMs === undefined ? null : shownLossSeconds(f.nowMs, f.lostSinceMs);
  const base = {
    clusterId: ids.length === 1 ? ids[0] : null,
    quorum: f.quorum,
    quorumLostSince: f.lostSinceMs === undefined ? null : new Date(f.lostSinceMs).toISOString(),
    quorumLostForSeconds: lostForSeconds,
    minLossSeconds: f.minLossSeconds,
    members: f.members,
    recovered: f.record ?? null,
  };
  const none = { recoverFrom: null, keeps: null, drops: null, call: null };
  if (f.quorum === null) return { ...base, ...none, needed: false, possible: false, reason: 'no member list is known yet' };
  if (f.quorum.hasQuorum) {
    const done = f.record === undefined ? '' : `; it was recovered from ${f.record.from.name} at ${f.record.writableAt}`;
    return {
      ...base,
      ...none,
      needed: false,
      possible: false,
      reason: `a quorum answers (${f.quorum.answering} of ${f.quorum.voters} voters): nothing to recover${done}`,
    };
  }
  const answering = f.members.flatMap((m) =>
    m.source !== 'none' && m.committedIndex !== null && m.raftTerm !== null && m.isLearner !== true
      ? [{ ...m, committedIndex: m.committedIndex, raftTerm: m.raftTerm }]
      : [],
  );
  const best = mostAdvanced(answering);
  if (best === undefined) {
    return {
      ...base,
      ...none,
      needed: true,
      possible: false,
      reason: 'no voter answers, neither its etcd nor its data directory: there is nothing to recover from',
    };
  }
  const decision = decideRecovery({ ...f, self: best.name, request: { from: best.name, clusterId: best.clusterId ?? '', force: false } });
  const behind = answering
    .filter((m) => m.name !== best.name)
    .map((m) => ({ name: m.name, id: m.id, committedIndex: m.committedIndex, entriesBehind: best.committedIndex - m.committedIndex }));
  const plan = {
    ...base,
    needed: true,
    recoverFrom: { name: best.name, id: best.id, committedIndex: best.committedIndex, raftTerm: best.raftTerm },
    keeps: { committedIndex: best.committedIndex },
    drops: {
      membersRemoved: f.members.filter((m) => m.id !== best.id).map((m) => m.name || m.id),
      lost: f.members.filter((m) => m.source === 'none').map((m) => m.name || m.id),
      behind,
    },
    call: { agent: f.agentOf(best.name), body: { from: best.name, clusterId: best.clusterId ?? '' } },
  };
  if (decision.kind === 'recover') {
    return {
      ...plan,
      possible: true,
      reason: `recover from ${best.name}: it holds the highest committed index (${best.committedIndex}) of the members that answer`,
    };
  }
  const waitable = decision.kind === 'refuse' && decision.code === 'unsafe' && 'minLossSeconds' in decision.details;
  return { ...plan, possible: waitable, reason: decision.kind === 'refuse' ? decision.message : 'already recovered' };
}
