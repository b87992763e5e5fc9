/**
 * Whether a recovery is allowed: the gates of POST /v1/recovery, as a pure decision over what the
 * agent has just read. Each refusal carries its figures. The gates, in the order they are checked:
 * - a quorum answers: nothing to recover (or, when the cluster holds the record of this very
 *   recovery, the answer is what was done: a replayed call changes nothing);
 * - the call goes to the agent of the member it recovers from (only that pod can restart its etcd);
 * - `clusterId` is the id every answering member reports (a misdirected call changes nothing);
 * - the quorum has been lost, as this agent saw it, for at least the minimum;
 * - `from` answers (its etcd, or its data directory through its agent) and is a voter;
 * - no member that answers knows a higher commit index than `from` (candidate.ts), unless `force`.
 *
 * Invariant: `recover` is answered only when every gate holds; `force` lifts the last gate alone.
 */
import type { MemberLogState, RecoveryRecord } from '../proto/recovery';
import { aheadOf } from './candidate';

/** Everything the decision depends on. */
export interface RecoveryFacts {
  /** This agent's member name. */
  self: string;
  request: { from: string; clusterId: string; force: boolean };
  nowMs: number;
  /** Since when this agent has seen the quorum lost without a break (ms), if it has. */
  lostSinceMs: number | undefined;
  minLossSeconds: number;
  /** The fresh observation's quorum; null when no member list is known. */
  quorum: { voters: number; answering: number; required: number; hasQuorum: boolean } | null;
  /** Every member of the last member list, with what its log says. */
  members: MemberLogState[];
  /** The recovery record of the cluster that answers, when a quorum answers and one is kept. */
  record?: RecoveryRecord;
}

/** A member a recovery removes. */
export type Removed = RecoveryRecord['removed'][number];

/** What the gates decide. */
export type RecoveryDecision =
  | { kind: 'already-recovered'; record: RecoveryRecord }
  | {
      kind: 'refuse';
      code: 'unsafe' | 'conflict' | 'bad-request' | 'unavailable' | 'not-found';
      message: string;
      details: Record<string, unknown>;
    }
  | {
      kind: 'recover';
      from: { name: string; id: string; committedIndex: number; raftTerm: number };
      clusterId: string;
      removed: Removed[];
      lostForSeconds: number;
      forced: boolean;
    };

/**
 * How long the quorum has been lost, in seconds, as the answers show it: rounded down to a tenth, so
 * that a loss the rule finds too short never reads as reaching the minimum (2.96 s shown as 3 beside
 * "less than 3 s").
 */
export function shownLossSeconds(nowMs: number, lostSinceMs: number): number {
  return Math.floor(Math.max(0, nowMs - lostSinceMs) / 100) / 10;
}

/** A cluster id as written in a call: lowercase hex without `0x` or leading zeros. */
export function normalizeClusterId(id: string): string {
  const hex = id.trim().toLowerCase().replace(/^0x/, '');
  return /^[0-9a-f]{1,16}$/.test(hex) ? BigInt(`0x${hex}`).toString(16) : hex;
}

/** Decides whether the recovery asked for may go ahead (see the module comment). */
export function decideRecovery(f: RecoveryFacts): RecoveryDecision {
  const { request } = f;
  const wanted = normalizeClusterId(request.clusterId);
  const refuse = (
    code: Extract<RecoveryDecision, { kind: 'refuse' }>['code'],
    message: string,
    details: Record<string, unknown> = {},
  ): RecoveryDecision => ({
    kind: 'refuse',
    code,
    message,
    details,
  });
  if (f.quorum === null) return refuse('unavailable', 'no member list is known yet, so the quorum cannot be counted');
  const quorumFigures = { voters: f.quorum.voters, answering: f.quorum.answering, required: f.quorum.required };
  if (f.quorum.hasQuorum) {
    if (f.record !== undefined && f.record.clusterId === wanted && f.record.from.name === request.from) {
      return { kind: 'already-recovered', record: f.record };
    }
    return refuse(
      'unsafe',
      `a quorum answers (${f.quorum.answering} of ${f.quorum.voters} voters, ${f.quorum.required} needed): there is nothing to recover`,
      { quorum: quorumFigures, ...(f.record === undefined ? {} : { recovered: f.record }) },
    );
  }
  const from = f.members.find((m) => m.name === request.from);
  if (from === undefined) {
    return refuse('not-found', `no member ${request.from} in the last member list (${f.members.map((m) => m.name || m.id).join(', ')})`);
  }
  if (f.self !== request.from) {
    return refuse(
      'bad-request',
      `POST /v1/recovery goes to the agent of the member it recovers from (${request.from}); this is ${f.self}'s agent`,
      {
        from: request.from,
        agent: f.self,
      },
    );
  }
  const ids = [...new Set(f.members.map((m) => m.clusterId).filter((id): id is string => id !== null))];
  if (ids.length === 0) return refuse('unavailable', 'no member reports its cluster id: neither an etcd nor a data directory answered');
  if (ids.length > 1) {
    return refuse(
      'conflict',
      `the members report different cluster ids (${ids.join(', ')}): there already are two clusters, recover by hand`,
      {
        clusterIds: Object.fromEntries(f.members.filter((m) => m.clusterId !== null).map((m) => [m.name, m.clusterId])),
      },
    );
  }
  if (ids[0] !== wanted) {
    return refuse('conflict', `the cluster's id is ${ids[0]}, not ${wanted}: this call is not for this cluster`, {
      clusterId: ids[0],
      asked: wanted,
    });
  }
  const lostForSeconds = f.lostSinceMs === undefined ? 0 : Math.max(0, (f.nowMs - f.lostSinceMs) / 1000);
  if (f.lostSinceMs === undefined || lostForSeconds < f.minLossSeconds) {
    const shown = f.lostSinceMs === undefined ? 0 : shownLossSeconds(f.nowMs, f.lostSinceMs);
    return refuse(
      'unsafe',
      f.lostSinceMs === undefined
        ? `this agent has not seen the quorum lost without a break; it must be lost for ${f.minLossSeconds} s (ETCD_AGENT_RECOVERY_MIN_LOSS_SECONDS)`
        : `the quorum has been lost for ${shown.toFixed(1)} s as this agent saw it, less than ${f.minLossSeconds} s (ETCD_AGENT_RECOVERY_MIN_LOSS_SECONDS)`,
      { quorum: quorumFigures, quorumLostForSeconds: shown, minLossSeconds: f.minLossSeconds },
    );
  }
  if (from.source === 'none' || from.committedIndex === null || from.raftTerm === null) {
    return refuse(
      'unavailable',
      `${from.name}'s log cannot be read: neither its etcd nor its data directory answers (${from.errors.join('; ')})`,
    );
  }
  if (from.isLearner === true) return refuse('unsafe', `${from.name} is a learner: a recovery starts from a voter`);
  const answering = f.members.flatMap((m) =>
    m.source !== 'none' && m.committedIndex !== null && m.raftTerm !== null
      ? [{ ...m, committedIndex: m.committedIndex, raftTerm: m.raftTerm }]
      : [],
  );
  const best = aheadOf({ name: from.name, committedIndex: from.committedIndex, raftTerm: from.raftTerm }, answering)[0];
  const forced = best !== undefined;
  if (forced && !request.force) {
    const lose = best.committedIndex - from.committedIndex;
    const advice =
      best.isLearner === true
        ? `${best.name} is a learner, which cannot be recovered from; add "force": true to drop them`
        : `recover from ${best.name}, or add "force": true`;
    return refuse(
      'unsafe',
      `${best.name} is more advanced than ${from.name} (committed index ${best.committedIndex}, term ${best.raftTerm}, against ${from.committedIndex}, term ${from.raftTerm})` +
        `: recovering from ${from.name} would drop ${lose} committed entr${lose === 1 ? 'y' : 'ies'}; ${advice}`,
      {
        from: { name: from.name, committedIndex: from.committedIndex, raftTerm: from.raftTerm },
        mostAdvanced: { name: best.name, committedIndex: best.committedIndex, raftTerm: best.raftTerm, isLearner: best.isLearner === true },
        entriesDropped: lose,
      },
    );
  }
  return {
    kind: 'recover',
    from: { name: from.name, id: from.id, committedIndex: from.committedIndex, raftTerm: from.raftTerm },
    clusterId: ids[0],
    removed: f.members
      .filter((m) => m.id !== from.id)
      .map((m) => ({ name: m.name, id: m.id, kind: m.source === 'none' ? 'lost' : 'behind', committedIndex: m.committedIndex })),
    lostForSeconds,
    forced,
  };
}
