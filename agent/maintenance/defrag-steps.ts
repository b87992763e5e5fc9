/**
 * The short steps of a defragmentation run, one function each, as the decision names them: wait,
 * compact, move leadership off the leader before its turn, disarm NOSPACE. Defragmenting a member is
 * defrag-member.ts. Each step records itself first (`run.recorder`), so another agent's
 * GET /v1/operations and this agent's GET /v1/health say what the run is doing.
 */
import { DEFRAG_MOVE_LEADER_MS, DEFRAG_STEP_TIMEOUT_MS, DEFRAG_WAIT_POLL_MS } from '../config/timings';
import { etcdRefusal } from '../etcd/errors';
import { Deadline, delay } from '../lib/deadline';
import { moveLeadership } from '../membership/move-leadership';
import type { MemberProbe } from '../membership/probe';
import { AgentError } from '../proto/errors';
import { describeRetention, type Retention } from '../proto/maintenance';
import { marksBefore } from './compaction-settle';
import type { Seen } from './defrag-look';
import type { DefragRun, RunDeps } from './defrag-run';
import { RunMoveContext } from './steps';
import { describeWait, sameWait, waitLimitMs, type Wait } from './wait-reason';

/**
 * Deadline of a compaction: reading the current revision, then a physical Compact, which answers
 * only once the backend has dropped the old revisions; twice an ordinary step.
 */
const COMPACT_TIMEOUT_MS = DEFRAG_STEP_TIMEOUT_MS * 2;

/** One more look later; a wait that lasts longer than its kind allows (wait-reason.ts) ends the run. */
export async function waitFor(run: DefragRun, wait: Wait): Promise<void> {
  const now = Date.now();
  if (run.waiting === undefined || !sameWait(run.waiting, wait)) {
    run.waiting = { member: wait.member, reason: wait.reason, since: now };
    await run.recorder.setStep(`waiting: ${describeWait(wait)}`, Deadline.in(DEFRAG_STEP_TIMEOUT_MS));
  }
  const waited = now - run.waiting.since;
  if (waited > waitLimitMs(wait.reason)) {
    throw new AgentError('unavailable', `waited ${Math.round(waited / 1000)} s: ${describeWait(wait)}; call again`, {
      details: { member: wait.member.name },
    });
  }
  await delay(DEFRAG_WAIT_POLL_MS);
}

/**
 * Compacts to the current revision less the retention (or the revision current that long ago), noting
 * first each voter's count of finished compactions from `seen`, the look that decided it: the next
 * looks wait until every voter has finished it (compaction-settle.ts). A revision compacted already
 * leaves nothing of this run's to wait for.
 */
export async function compact(run: DefragRun, deps: RunDeps, seen: Seen): Promise<void> {
  const { cluster, logger } = deps;
  const retention = run.options.retention as Retention;
  const deadline = Deadline.in(COMPACT_TIMEOUT_MS);
  await run.recorder.setStep(`compacting the key history, keeping ${describeRetention(retention)}`, Deadline.in(DEFRAG_STEP_TIMEOUT_MS));
  const { revision, skipped } = await compactionTarget(deps, retention, deadline);
  if (skipped === undefined && revision !== undefined) {
    const before = marksBefore(
      seen.list.members.filter((m) => !m.isLearner),
      seen.input.metrics,
    );
    try {
      await cluster.compact(revision, deadline);
      run.progress.settling = before;
    } catch (err) {
      // Compacted to that revision or beyond already (an earlier run, etcd's auto-compaction): done.
      if (etcdRefusal(err) !== 'compacted') throw err;
    }
    run.compaction = { revision, retention };
    logger.info('compacted the key history', { run: run.id, revision, retention, requestId: run.requestId });
  } else {
    run.compaction = { skipped: skipped ?? 'no revision to compact to' };
    logger.info('compaction skipped', { run: run.id, reason: run.compaction.skipped, requestId: run.requestId });
  }
  run.progress.compacted = true;
}

/** The revision the retention keeps history from, or why there is none to compact to. */
async function compactionTarget(deps: RunDeps, retention: Retention, deadline: Deadline): Promise<{ revision?: number; skipped?: string }> {
  if ('retainRevisions' in retention) {
    const current = await deps.cluster.currentRevision(deadline);
    const revision = current - retention.retainRevisions;
    if (revision < 1)
      return { skipped: `the key history is at revision ${current}, within the ${retention.retainRevisions} revisions to keep` };
    return { revision };
  }
  const revision = deps.history.revisionAt(Date.now() - retention.retainSeconds * 1000);
  if (revision !== undefined) return { revision };
  const oldest = deps.history.oldest();
  return {
    skipped: `this agent has seen the revisions only since ${oldest === undefined ? 'never' : new Date(oldest).toISOString()}, not ${retention.retainSeconds} s back`,
  };
}

/** Moves leadership from the leader, next to do, to a member already done, before the leader's own turn. */
export async function moveLeaderOff(run: DefragRun, deps: RunDeps, from: MemberProbe, to: MemberProbe): Promise<void> {
  await run.recorder.setStep(
    `moving leadership from ${from.member.name} to ${to.member.name}, already defragmented, before defragmenting ${from.member.name}`,
    Deadline.in(DEFRAG_STEP_TIMEOUT_MS),
  );
  const context = new RunMoveContext(run, Deadline.in(DEFRAG_MOVE_LEADER_MS), deps);
  run.progress.leaderMoves++;
  await moveLeadership(context, run.recorder, from, to);
  run.leaderTransferred = true;
  run.movedFrom = from.member.id;
}

/** Disarms the NOSPACE alarm of every member that has it raised, and nothing else. */
export async function disarmNoSpace(run: DefragRun, deps: RunDeps): Promise<void> {
  const { cluster, logger } = deps;
  await run.recorder.setStep('disarming NOSPACE: every database is under its quota less the margin', Deadline.in(DEFRAG_STEP_TIMEOUT_MS));
  const deadline = Deadline.in(DEFRAG_STEP_TIMEOUT_MS);
  const raised = (await cluster.alarms(deadline)).filter((a) => a.alarm === 'NOSPACE');
  for (const alarm of raised) await cluster.disarmNoSpace(alarm.memberId, deadline);
  run.alarm.disarmed = true;
  logger.warn('disarmed NOSPACE', { run: run.id, members: raised.map((a) => a.memberId), requestId: run.requestId });
}
