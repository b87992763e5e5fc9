/**
 * A defragmentation run's record in etcd (etcd/maintenance-record.ts): the earlier run it continues,
 * what it has done so far, and its end.
 *
 * Invariant: the record is written after every member done, when the run stops and at its end, and
 * is never needed to go on: a run that stopped anywhere is continued by the next one deciding from
 * what the members say; the record only lets that one say which run it continues and what that run
 * did. A write etcd refuses under NOSPACE is dropped, since the run must go on to clear the alarm.
 */
import { DEFRAG_STEP_TIMEOUT_MS } from '../config/timings';
import { isNoSpace, toAgentError } from '../etcd/errors';
import { readDefragRecord, writeDefragRecord } from '../etcd/maintenance-record';
import { Deadline } from '../lib/deadline';
import type { DefragmentRecord, DefragmentResult } from '../proto/maintenance';
import { skippedMembers } from './defrag-decision';
import type { Seen } from './defrag-look';
import { runSnapshot, type DefragRun, type RunDeps } from './defrag-run';

/** An earlier run that stopped before its end (its agent died): this one continues it, and says what it did. */
export async function readEarlierRun(run: DefragRun, deps: RunDeps): Promise<void> {
  const record = await readDefragRecord(deps.cluster, deps.config.keyPrefix, Deadline.in(DEFRAG_STEP_TIMEOUT_MS)).catch(() => undefined);
  if (record === undefined || record.finishedAt !== undefined || record.id === run.id) return;
  run.continues = record.id;
  run.earlier = record.members.map((m) => ({ ...m, earlierRun: true }));
  deps.logger.info('continuing a defragmentation run that stopped before its end', {
    run: run.id,
    continues: record.id,
    by: record.agent,
    requestId: run.requestId,
  });
}

/** The run as recorded in etcd; `outcome` once it has ended. Refused (NOSPACE) writes are the caller's to ignore. */
export async function writeRecord(run: DefragRun, deps: RunDeps, outcome?: DefragmentResult['outcome']): Promise<void> {
  if (run.members.length === 0 && outcome === undefined && run.continues === undefined) return;
  const record: DefragmentRecord = {
    id: run.id,
    agent: run.agent,
    startedAt: run.startedAt.toISOString(),
    ...(run.finishedAt === undefined || outcome === undefined ? {} : { finishedAt: run.finishedAt.toISOString(), outcome }),
    members: [...run.earlier, ...run.members],
    ...(run.compaction === null ? {} : { compaction: run.compaction }),
  };
  try {
    await writeDefragRecord(deps.cluster, deps.config.keyPrefix, record, Deadline.in(DEFRAG_STEP_TIMEOUT_MS));
  } catch (err) {
    if (!isNoSpace(err)) throw err;
  }
}

/**
 * The run's answer once the decision says done: `defragmented` when it did anything (a member, a
 * disarm, a compaction, or continuing an earlier run), recorded in etcd; else `nothing-to-do`, with
 * the last run's record.
 */
export async function finish(
  run: DefragRun,
  deps: RunDeps,
  outcome: 'defragmented' | 'nothing-to-do',
  seen: Seen,
): Promise<DefragmentResult> {
  run.skipped = skippedMembers(seen.input);
  run.step = 'done';
  const didSomething =
    run.members.length > 0 ||
    run.alarm.disarmed ||
    run.continues !== undefined ||
    (run.compaction !== null && 'revision' in run.compaction);
  const result = runSnapshot(run, outcome === 'nothing-to-do' && didSomething ? 'defragmented' : outcome);
  run.finishedAt = new Date();
  result.run.finishedAt = run.finishedAt.toISOString();
  if (didSomething) {
    await writeRecord(run, deps, result.outcome).catch((err: unknown) => {
      deps.logger.warn('could not record the defragmentation run in etcd', { run: run.id, error: toAgentError(err).message });
    });
  } else {
    const last = await readDefragRecord(deps.cluster, deps.config.keyPrefix, Deadline.in(DEFRAG_STEP_TIMEOUT_MS)).catch(() => undefined);
    if (last !== undefined) result.lastRun = last;
  }
  return result;
}
