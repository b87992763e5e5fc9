/**
 * The one write the agent makes so that a joining member applies what it has been sent
 * (membership/apply-nudge-decision.ts says when). It goes through the quorum like any write, to one
 * key under the key prefix that it overwrites, so it adds one raft entry and one revision and keeps
 * no history of its own:
 *
 *   <prefix>apply-nudge → {"member": "<hex id>", "at": "<ISO time>"}
 */
import type { Deadline } from '../lib/deadline';
import type { EtcdCluster } from './cluster-client';
import { toAgentError } from './errors';

/** The key the nudge writes. */
export function applyNudgeKey(keyPrefix: string): string {
  return `${keyPrefix}apply-nudge`;
}

/** Writes the nudge for member `memberId` through the quorum; throws an AgentError when etcd refuses it. */
export async function writeApplyNudge(
  cluster: Pick<EtcdCluster, 'write'>,
  keyPrefix: string,
  memberId: string,
  deadline: Deadline,
): Promise<void> {
  const value = JSON.stringify({ member: memberId, at: new Date().toISOString() });
  try {
    await cluster.write(deadline, (raw, at) => raw.put(applyNudgeKey(keyPrefix)).value(value).options({ deadline: at }).exec());
  } catch (err) {
    throw toAgentError(err);
  }
}
