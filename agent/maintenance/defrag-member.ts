/**
 * A defragmentation run's main step: defragment one member, then note what it must apply before the
 * next member's turn.
 *
 * Invariant: one Defragment at a time in the whole cluster. Whatever holds the right to act, right
 * before the RPC every member's own `etcd_disk_defrag_inflight` is read again and must be 0: no lock
 * covers a Defragment that outlived the run that sent it (its agent killed or stopped while etcd went
 * on), or someone's etcdctl. A member whose RPC failed is tried again by a later decision, at most
 * MAX_DEFRAG_FAILURES times in all; etcd may still be defragmenting it, which the next look waits out.
 */
import { DEFRAG_MEMBER_TIMEOUT_MS, DEFRAG_STEP_TIMEOUT_MS } from '../config/timings';
import { toAgentError } from '../etcd/errors';
import { crashPointAfter } from '../lib/crash-point';
import { Deadline, delay } from '../lib/deadline';
import { describeMember } from '../membership/match';
import type { MemberProbe } from '../membership/probe';
import { AgentError } from '../proto/errors';
import type { DbSizes } from '../proto/maintenance';
import type { Member } from '../proto/types';
import { writeRecord } from './defrag-end';
import { readMetrics, type Seen } from './defrag-look';
import type { DefragRun, RunDeps } from './defrag-run';

/** Failed Defragment RPCs of one member after which the run stops instead of trying it again. */
const MAX_DEFRAG_FAILURES = 2;
/** With ETCD_AGENT_CRASH_POINTS=defragment-sent-<n> (tests only): the agent dies this long after sending the n-th member's Defragment, while etcd runs it. */
const CRASH_IN_FLIGHT_MS = 50;
/**
 * Deadline of each Status call for a member's sizes after its Defragment: the member answers Status
 * again once its defragmentation is over, so short calls, tried again, find that moment soon.
 */
const SIZES_STATUS_TIMEOUT_MS = 1000;
/** Pause between those calls. */
const SIZES_RETRY_PAUSE_MS = 200;
/** Those calls, before the sizes after are given as unknown (the sizes before): about 12 s in all. */
const SIZES_ATTEMPTS = 10;

/** Defragments `target`, after the last guard: no member is defragmenting right now. */
export async function defragmentMember(run: DefragRun, deps: RunDeps, target: MemberProbe, wasLeader: boolean, seen: Seen): Promise<void> {
  const { member, url, status } = target;
  if (url === undefined || status === undefined)
    throw new AgentError('internal', `decided to defragment ${describeMember(member)}, which did not answer`);
  const order = run.members.length + 1;
  await run.recorder.setStep(`defragmenting ${member.name} (${order} of the members to do)`, Deadline.in(DEFRAG_STEP_TIMEOUT_MS), member);
  if (await anyDefragmenting(deps, seen)) return; // the next look waits for it
  const before: DbSizes = { dbSizeBytes: status.dbSizeBytes, dbSizeInUseBytes: status.dbSizeInUseBytes };
  run.recorder.assertHeld();
  const led = wasLeader || run.movedFrom === member.id;
  const durationMs = await sendDefragment(run, deps, member, url, order, { before, wasLeader: led });
  if (durationMs === undefined) return; // etcd may go on: the next look waits while the member's gauge says so, then decides again
  const after = await sizesAfter(run, deps, member, url, before);
  const catchUpIndex = await leaderCommitted(deps, seen, status.raftIndex);
  run.progress.done.set(member.id, { catchUpIndex });
  run.members.push({ id: member.id, name: member.name, before, after, durationMs, wasLeader: led });
  const { metrics, logger } = deps;
  metrics.defragDbSize.set({ member: member.name, when: 'before' }, before.dbSizeBytes);
  metrics.defragDbSize.set({ member: member.name, when: 'after' }, after.dbSizeBytes);
  metrics.defragDbSizeInUse.set({ member: member.name, when: 'before' }, before.dbSizeInUseBytes);
  metrics.defragDbSizeInUse.set({ member: member.name, when: 'after' }, after.dbSizeInUseBytes);
  metrics.defragDuration.set({ member: member.name }, durationMs / 1000);
  logger.info('defragmented a member', {
    run: run.id,
    member: member.name,
    wasLeader: led,
    before,
    after,
    durationMs,
    mode: run.mode,
    requestId: run.requestId,
  });
  await writeRecord(run, deps).catch(() => undefined);
}

/** The last guard: a member's own gauge says it is defragmenting now (a Defragment no lock covers). */
async function anyDefragmenting(deps: RunDeps, seen: Seen): Promise<boolean> {
  const gauges = await readMetrics(deps, seen.list.members);
  return [...gauges.values()].some((m) => !('error' in m) && m.defragmenting);
}

/**
 * Sends the Defragment RPC and waits for its answer: its duration in ms, or undefined when it failed
 * and may be tried again; throws at the member's MAX_DEFRAG_FAILURES-th failure.
 */
async function sendDefragment(
  run: DefragRun,
  deps: RunDeps,
  member: Member,
  url: string,
  order: number,
  log: { before: DbSizes; wasLeader: boolean },
): Promise<number | undefined> {
  const { cluster, metrics, logger } = deps;
  run.defragmenting = member;
  logger.info('defragmenting a member', {
    run: run.id,
    member: member.name,
    before: log.before,
    wasLeader: log.wasLeader,
    mode: run.mode,
    requestId: run.requestId,
  });
  const started = performance.now();
  try {
    const answered = cluster.defragment(url, DEFRAG_MEMBER_TIMEOUT_MS);
    crashPointAfter(`defragment-sent-${order}`, CRASH_IN_FLIGHT_MS);
    await answered;
    metrics.defrags.inc({ member: member.name, result: 'ok' });
  } catch (err) {
    const error = toAgentError(err);
    metrics.defrags.inc({ member: member.name, result: error.code });
    const failures = (run.failures.get(member.id) ?? 0) + 1;
    run.failures.set(member.id, failures);
    logger.warn('a Defragment RPC failed', { run: run.id, member: member.name, error: error.message, failures, requestId: run.requestId });
    if (failures >= MAX_DEFRAG_FAILURES) throw error;
    return undefined;
  } finally {
    run.defragmenting = undefined;
  }
  return Math.round(performance.now() - started);
}

/** The member's sizes once it answers again (its Status waits until its defragmentation is over). */
async function sizesAfter(run: DefragRun, deps: RunDeps, member: Member, url: string, before: DbSizes): Promise<DbSizes> {
  for (let attempt = 0; attempt < SIZES_ATTEMPTS; attempt++) {
    try {
      const s = await deps.cluster.memberStatus(url, SIZES_STATUS_TIMEOUT_MS);
      return { dbSizeBytes: s.dbSizeBytes, dbSizeInUseBytes: s.dbSizeInUseBytes };
    } catch {
      await delay(SIZES_RETRY_PAUSE_MS);
    }
  }
  deps.logger.warn('no status after a defragmentation; its sizes are unknown', { run: run.id, member: member.name });
  return before;
}

/** The leader's committed index now: what the member just defragmented must apply before the next one's turn. */
async function leaderCommitted(deps: RunDeps, seen: Seen, fallback: number): Promise<number> {
  const leader = seen.input.probe.leader;
  if (leader?.url === undefined) return fallback;
  try {
    return (await deps.cluster.memberStatus(leader.url, deps.config.statusTimeoutMs)).raftIndex;
  } catch {
    return leader.status?.raftIndex ?? fallback;
  }
}
