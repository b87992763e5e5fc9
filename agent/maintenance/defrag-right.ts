/**
 * The right of a defragmentation run to act: the cluster's membership lock, or, while etcd's NOSPACE
 * alarm is raised (no lock can be written then), the NOSPACE runner rule (membership/nospace-runner.ts)
 * once no lock taken before the alarm is held. defragment.ts's module comment says why.
 *
 * Invariant: a run acts only with one of the two; `run.mode` says which, and `run.recorder` records
 * its steps where that right lets them be seen (steps.ts). Another agent's defragmentation holding
 * the lock is `RunningElsewhere`, which the service answers `in-progress` there; another agent being
 * the NOSPACE runner is `NotTheRunner`, which the service hands a client's call on to (hand-on.ts).
 */
import { DEFRAG_STEP_TIMEOUT_MS, LOCK_MAX_WAIT_MS } from '../config/timings';
import type { HeldLock } from '../etcd/held-lock';
import { Deadline } from '../lib/deadline';
import { noSpaceRunner } from '../membership/nospace-runner';
import { AgentError, isAgentError } from '../proto/errors';
import type { Member, MemberList, OperationRecord } from '../proto/types';
import type { DefragRun, RunDeps } from './defrag-run';
import { LocalSteps, LockSteps } from './steps';

/** Another agent's defragmentation holds the cluster lock: what this call asks for is under way there. */
export class RunningElsewhere extends Error {
  constructor(readonly record: OperationRecord) {
    super(`agent ${record.agent} is defragmenting the cluster (${record.step})`);
    this.name = 'RunningElsewhere';
  }
}

/**
 * Under NOSPACE another agent is the runner: the `busy` refusal, with the runner's member, so that the
 * service can hand a client's call on to that agent (hand-on.ts); undefined when no voter is started.
 */
export class NotTheRunner extends AgentError {
  constructor(
    message: string,
    details: Record<string, unknown>,
    readonly runner: Member | undefined,
  ) {
    super('busy', message, { details });
  }
}

/**
 * Deadline of taking the lock: 2 s past the lock's own longest wait for another holder, so that the
 * time `acquire` keeps back for the work (LOCK_RESERVE_MS) does not shorten that wait, and the last
 * attempt after it has time to answer.
 */
const LOCK_DEADLINE_MS = LOCK_MAX_WAIT_MS + 2000;

/** The lock, or under NOSPACE the runner rule; throws busy (or RunningElsewhere) when another has it. */
export async function takeRight(run: DefragRun, deps: RunDeps): Promise<void> {
  const { cluster } = deps;
  run.step = 'reading the member list and the alarms';
  const deadline = Deadline.in(DEFRAG_STEP_TIMEOUT_MS);
  const [list, alarms] = await Promise.all([cluster.listMembers(deadline), cluster.alarms(deadline)]);
  if (!alarms.some((a) => a.alarm === 'NOSPACE')) return takeLock(run, deps);
  run.alarm.noSpace = true;
  await takeNoSpaceRight(run, deps, list, deadline);
}

/** Takes the membership lock (waiting for another holder as long as the lock waits) and records the step in it. */
export async function takeLock(run: DefragRun, deps: RunDeps): Promise<void> {
  run.step = 'waiting for the membership lock';
  let held: HeldLock;
  try {
    held = await deps.lock.acquire({ action: 'defragment', member: { name: '', peerURLs: [] } }, Deadline.in(LOCK_DEADLINE_MS));
  } catch (err) {
    const operation = isAgentError(err, 'busy') ? (err.details?.operation as OperationRecord | undefined) : undefined;
    if (operation?.action === 'defragment') throw new RunningElsewhere(operation);
    throw err;
  }
  run.held = held;
  run.mode = 'lock';
  run.recorder = new LockSteps(held, run);
  await run.recorder.setStep('taken the lock', Deadline.in(DEFRAG_STEP_TIMEOUT_MS));
}

/** Under NOSPACE: this agent runs only as the runner, and only once no lock taken before the alarm is held. */
async function takeNoSpaceRight(run: DefragRun, deps: RunDeps, list: MemberList, deadline: Deadline): Promise<void> {
  const runner = noSpaceRunner(list.members);
  if (runner?.name !== deps.config.memberName) {
    const who = runner === undefined ? 'no started voter' : runner.name;
    throw new NotTheRunner(
      `etcd's NOSPACE alarm is raised, so the cluster lock cannot be written; while it lasts only the agent of the started voter with the lowest id (${who}) defragments. ` +
        (runner === undefined
          ? ''
          : `Call that agent (kubectl exec ${runner.name} -c etcd-lifecycle-agent -- etcd-lifecycle-agent defragment)`),
      { alarm: 'NOSPACE', reason: 'nospace-runner', runner: runner?.name },
      runner,
    );
  }
  const holder = await deps.lock.holder(deadline);
  if (holder !== undefined) {
    if (holder.record?.action === 'defragment') throw new RunningElsewhere(holder.record);
    throw new AgentError(
      'busy',
      `NOSPACE is raised and the cluster lock, taken before, is still held by agent ${holder.agent || 'unknown'}${holder.record === undefined ? '' : ` (${holder.record.action}, ${holder.record.step})`}`,
      {
        details: { alarm: 'NOSPACE', ...(holder.record === undefined ? {} : { operation: holder.record }) },
      },
    );
  }
  run.mode = 'nospace';
  run.recorder = new LocalSteps(run);
  deps.logger.warn('defragmenting under NOSPACE without the cluster lock, as the runner of the lowest member id', {
    run: run.id,
    requestId: run.requestId,
  });
}
