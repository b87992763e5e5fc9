/**
 * One defragmentation run, in a straight line: take the right to act, then look at the members,
 * decide (defrag-decision.ts), do that one step, and look again, until the decision says done or
 * refuses. The run lives in the agent, not in a call: a call waits for it at most its deadline
 * (service.ts), because a big member's Defragment outlasts any call and must never be left running
 * while another starts.
 *
 * The right to act:
 * - normally the cluster's membership lock (etcd/lock.ts), with an operation record whose step names
 *   the member being defragmented (GET /v1/operations, /v1/health's `operations`). Membership
 *   changes wait meanwhile; another agent's defragmentation is answered "in progress there".
 * - while etcd's NOSPACE alarm is raised, no lock can be written (etcd refuses every put and lease
 *   grant). Then only the agent of the started voter with the lowest id runs (membership/
 *   nospace-runner.ts says why that is exclusive), and only once no lock taken before the alarm is
 *   held. When the alarm is gone (this run disarmed it) and work is left, the run takes the lock.
 *   A caller's call to another agent is handed on to the runner's (hand-on.ts), never run there.
 *
 * Whatever holds the right, one more guard comes right before every Defragment RPC: every member's
 * own `etcd_disk_defrag_inflight` gauge is 0. It covers what no lock can: a Defragment that outlived
 * the run that sent it (its agent killed or stopped while etcd went on), or someone's etcdctl.
 *
 * Crash safety: nothing the run knows is needed to continue it. The next run decides from what the
 * members say (a member done is below the thresholds; one being defragmented is waited for), and the
 * record in etcd (etcd/maintenance-record.ts) lets it say which earlier run it continues and what that
 * one did.
 *
 * The run's state is one record (defrag-run.ts); each step is a function over it:
 *   defrag-right.ts    take the right to act: the lock, or the NOSPACE runner rule
 *   defrag-end.ts      read the earlier run; record the run in etcd; finish
 *   defrag-look.ts     look at the members, and decide (defrag-decision.ts)
 *   defrag-steps.ts    wait (for the reasons of wait-reason.ts), compact, move leadership off the
 *                      leader before its turn, disarm NOSPACE
 *   defrag-member.ts   defragment one member, after the last guard
 */
import { shuttingDownError } from '../etcd/errors';
import type { DefragmentResult, MaintenanceView } from '../proto/maintenance';
import type { DefragDecision } from './defrag-decision';
import { finish, readEarlierRun, writeRecord } from './defrag-end';
import { decide, look, type Seen } from './defrag-look';
import { defragmentMember } from './defrag-member';
import { takeLock, takeRight } from './defrag-right';
import { newDefragRun, runSnapshot, runView, type DefragRun, type RunDeps, type RunOptions } from './defrag-run';
import { compact, disarmNoSpace, moveLeaderOff, waitFor } from './defrag-steps';

export { NotTheRunner, RunningElsewhere } from './defrag-right';
export type { RunDeps, RunOptions } from './defrag-run';

/** One run, as the service holds it: started when made, `result` settles when it ends. */
export class DefragmentRun {
  /** The run's state (defrag-run.ts). */
  readonly state: DefragRun;
  readonly result: Promise<DefragmentResult>;

  constructor(deps: RunDeps, options: RunOptions, requestId?: string) {
    this.state = newDefragRun(deps.config.memberName, options, requestId);
    this.result = execute(this.state, deps);
    // The service reads the result (and its failure); an unread failure must not crash the agent.
    this.result.catch(() => undefined);
  }

  /** The run's id, as its answers, log lines and record name it. */
  get id(): string {
    return this.state.id;
  }

  /** The step reached. */
  get step(): string {
    return this.state.step;
  }

  /** Asks the run to stop at its next step (the agent is stopping); a Defragment in flight goes on in etcd. */
  stop(): void {
    this.state.stopping = true;
  }

  /** What `/v1/health` shows of the run. */
  view(): MaintenanceView {
    return runView(this.state);
  }

  /** The answer as it stands: `in-progress` until the run has ended. */
  snapshot(outcome: DefragmentResult['outcome'] = 'in-progress'): DefragmentResult {
    return runSnapshot(this.state, outcome);
  }
}

/** The run, start to end: the right to act, the earlier run, then look, decide and act until done. */
async function execute(run: DefragRun, deps: RunDeps): Promise<DefragmentResult> {
  const { metrics } = deps;
  metrics.defragRunning.set(1);
  try {
    await takeRight(run, deps);
    await readEarlierRun(run, deps);
    for (;;) {
      if (run.stopping) throw shuttingDownError();
      const seen = await look(run, deps);
      const decision = await decide(run, seen);
      if (decision === undefined) continue;
      if (decision.kind === 'done') return await finish(run, deps, decision.outcome, seen);
      // The alarm is gone (this run disarmed it, or someone did) and work is left: from now on, under the lock.
      if (run.mode === 'nospace' && !seen.input.noSpace) await takeLock(run, deps);
      await act(run, deps, decision, seen);
    }
  } catch (err) {
    await writeRecord(run, deps).catch(() => undefined);
    throw err;
  } finally {
    metrics.defragRunning.set(0);
    run.defragmenting = undefined;
    await run.held?.release();
  }
}

/** The one step the decision names. */
async function act(run: DefragRun, deps: RunDeps, decision: Exclude<DefragDecision, { kind: 'done' }>, seen: Seen): Promise<void> {
  if (decision.kind !== 'wait') run.waiting = undefined;
  switch (decision.kind) {
    case 'wait':
      return waitFor(run, decision);
    case 'compact':
      return compact(run, deps, seen);
    case 'move-leader':
      return moveLeaderOff(run, deps, decision.from, decision.to);
    case 'defragment':
      return defragmentMember(run, deps, decision.target, decision.wasLeader, seen);
    case 'disarm':
      return disarmNoSpace(run, deps);
  }
}
