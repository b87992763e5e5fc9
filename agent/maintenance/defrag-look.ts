/**
 * A defragmentation run's look at the cluster and the decision taken from it: the member list, every
 * member's Status and own gauges, and the alarms, then defrag-decision.ts.
 *
 * Invariant: a run refuses (or stops) for an unhealthy cluster only once its looks have found it so
 * for DEFRAG_UNHEALTHY_CONFIRM_MS; before that it looks again. A single Status answered late does not
 * show a cluster that cannot spare a member, and the refusal would end a run that has work left.
 */
import {
  DEFRAG_METRICS_TIMEOUT_MS,
  DEFRAG_STATUS_TIMEOUT_MS,
  DEFRAG_STEP_TIMEOUT_MS,
  DEFRAG_UNHEALTHY_CONFIRM_MS,
  DEFRAG_WAIT_POLL_MS,
} from '../config/timings';
import { toAgentError } from '../etcd/errors';
import type { MetricsAnswer } from '../etcd/member-metrics';
import { Deadline, delay } from '../lib/deadline';
import { probeMembers } from '../membership/probe';
import { isAgentError } from '../proto/errors';
import type { Member, MemberList } from '../proto/types';
import { advanceMarks } from './compaction-settle';
import { decideDefrag, type DefragDecision, type DefragInput } from './defrag-decision';
import type { DefragRun, RunDeps } from './defrag-run';

/** What one look at the cluster saw. */
export interface Seen {
  list: MemberList;
  input: DefragInput;
}

/**
 * Pause before looking again at a cluster found unhealthy but not for long enough yet: two wait
 * polls, so the confirmation costs a handful of looks, not dozens.
 */
const LOOK_AGAIN_MS = DEFRAG_WAIT_POLL_MS * 2;

/**
 * The member list, every member's own gauges, then every member's Status, and the alarms. The gauges
 * are read before the Status, never beside it: a Status answered before a backend commit that the
 * gauges, read later, already count does not show what that commit freed, and the run would take a
 * compaction for settled (compaction-settle.ts) before the in-use sizes it decides by show it.
 */
export async function look(run: DefragRun, deps: RunDeps): Promise<Seen> {
  const { cluster, config } = deps;
  const deadline = Deadline.in(DEFRAG_STEP_TIMEOUT_MS);
  const list = await cluster.listMembers(deadline);
  const [[metrics, probe], alarms] = await Promise.all([
    readMetrics(deps, list.members).then(
      async (m) => [m, await probeMembers(cluster, list.members, Math.max(config.statusTimeoutMs, DEFRAG_STATUS_TIMEOUT_MS))] as const,
    ),
    cluster.alarms(deadline),
  ]);
  const noSpace = alarms.some((a) => a.alarm === 'NOSPACE');
  if (noSpace) run.alarm.noSpace = true;
  run.progress.settling = advanceMarks(run.progress.settling, metrics);
  return {
    list,
    input: {
      probe,
      metrics,
      noSpace,
      options: { ...run.options, compact: run.options.retention !== undefined },
      progress: { ...run.progress },
    },
  };
}

/** Every started member's own gauges, in parallel. */
export async function readMetrics(deps: RunDeps, members: Member[]): Promise<Map<string, MetricsAnswer>> {
  const answers = await Promise.all(
    members
      .filter((m) => m.clientURLs.length > 0)
      .map(async (m): Promise<[string, MetricsAnswer]> => {
        try {
          const answer = await deps.cluster.memberMetrics(m.clientURLs[0], DEFRAG_METRICS_TIMEOUT_MS);
          deps.onMetrics?.(m, answer);
          return [m.id, answer];
        } catch (err) {
          return [m.id, { error: toAgentError(err).message }];
        }
      }),
  );
  return new Map(answers);
}

/** The decision from `seen`; undefined, after a pause, while an `unhealthy` refusal is not confirmed yet. */
export async function decide(run: DefragRun, seen: Seen): Promise<DefragDecision | undefined> {
  try {
    const decision = decideDefrag(seen.input);
    run.unhealthySince = undefined;
    return decision;
  } catch (err) {
    if (!lookAgain(run, err)) throw err;
    await delay(LOOK_AGAIN_MS);
    return undefined;
  }
}

/** True while an `unhealthy` refusal has lasted less than DEFRAG_UNHEALTHY_CONFIRM_MS. */
function lookAgain(run: DefragRun, err: unknown): boolean {
  if (!isAgentError(err, 'unsafe') || err.details?.reason !== 'unhealthy') return false;
  const now = Date.now();
  run.unhealthySince ??= now;
  if (now - run.unhealthySince >= DEFRAG_UNHEALTHY_CONFIRM_MS) return false;
  run.step = `looking again: ${err.message}`;
  return true;
}
