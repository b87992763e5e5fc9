/**
 * Moving etcd leadership: MoveLeader sent to the leader at its own client URL
 * (etcd accepts it only there), then a wait until the successor reports a
 * leader other than the old one. Used by transfer, and by a leave of the leader
 * so that the cluster never waits out an election for a leader that left.
 */
import { timeoutError, type Deadline } from '../lib/deadline';
import type { ChangeKind, EtcdCluster } from '../etcd/cluster-client';
import type { StepRecorder } from '../etcd/held-lock';
import { AgentError } from '../proto/errors';
import { pollUntil } from '../lib/poll';
import { describeMember } from './match';
import type { MemberProbe } from './probe';
import type { LoggedMember } from './run';

/**
 * What a leadership move needs of the execution it belongs to: a membership action's ActionRun,
 * or a maintenance run (agent/maintenance/) moving leadership off a member it is about to defragment.
 */
export interface MoveContext {
  readonly deadline: Deadline;
  readonly deps: { cluster: Pick<EtcdCluster, 'moveLeader' | 'memberStatus'> };
  /** Records `step` as begun; throws `timeout` when the deadline has passed. */
  begin(step: string): void;
  /** The deadline of one Status call. */
  statusTimeoutMs(): number;
  /** Sends one membership RPC under `held`, recording the step first and logging the change. */
  send<T>(held: StepRecorder, kind: ChangeKind, member: LoggedMember, rpc: () => Promise<T>): Promise<T>;
}

/** Pause between two looks at the successor while it takes over. */
const TAKE_OVER_POLL_MS = 50;

/** MoveLeader from `from` (the leader) to `to`, then waits until `to` names a leader other than `from`. */
export async function moveLeadership(run: MoveContext, held: StepRecorder, from: MemberProbe, to: MemberProbe): Promise<void> {
  const fromUrl = from.url;
  const toUrl = to.url;
  if (fromUrl === undefined || toUrl === undefined) {
    throw new AgentError('unavailable', 'the leader or its successor has no client URL to reach it at');
  }
  await run.send(held, 'move-leader', to.member, () => run.deps.cluster.moveLeader(fromUrl, to.member.id, run.deadline));
  const step = `waiting for ${describeMember(to.member)} to take over leadership`;
  run.begin(step);
  const tookOver = await pollUntil({ until: run.deadline.at, pauseMs: TAKE_OVER_POLL_MS }, async () => {
    try {
      const status = await run.deps.cluster.memberStatus(toUrl, run.statusTimeoutMs());
      return status.leaderId !== '0' && status.leaderId !== from.member.id ? true : undefined;
    } catch {
      return undefined; // not answering this instant: ask again
    }
  });
  if (tookOver === undefined) throw timeoutError(step);
}
