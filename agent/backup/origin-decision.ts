/**
 * Whether the backup a restore chose is this cluster's. The restoring pod cannot ask its cluster's
 * id: every data directory is gone, and the restored cluster gets a new id anyway. What it does know
 * is its initial members (`--initial-cluster`), and every manifest records the members of the cluster
 * it was taken of. Pure.
 *
 *   a member of the backup (name and a peer URL) is an initial member of this pod  → restore
 *   none is, or the manifest records no members (an older agent's)                 → refuse
 *   refused, but forced (ETCD_AGENT_RESTORE_FORCE)                                  → restore, saying so
 *
 * Invariant: a backup of another cluster (another store prefix given by mistake, a copy from another
 * environment) is never restored over this one's lost data unless a person said so.
 */
import type { Manifest } from '../proto/backup';
import { sameUrl, type RestoreMember } from './restore-decision';

/** What the rule says of a chosen backup. */
export type OriginVerdict =
  { kind: 'same-cluster'; member: string } | { kind: 'forced'; reason: string } | { kind: 'refused'; reason: string };

/** Decides; see the table in the module comment. */
export function decideOrigin(
  manifest: Pick<Manifest, 'name' | 'clusterId' | 'members'>,
  initial: readonly RestoreMember[],
  force: boolean,
): OriginVerdict {
  const members = manifest.members ?? [];
  const shared = members.find((m) => initial.some((i) => i.name === m.name && m.peerURLs.some((u) => sameUrl(u, i.peerURL))));
  if (shared !== undefined) return { kind: 'same-cluster', member: shared.name };
  const theirs =
    members.length === 0
      ? 'records no members (an older agent took it), so it cannot be told to be this cluster'
      : `was taken of members ${members.map((m) => `${m.name || '(unstarted)'}=${m.peerURLs.join('|')}`).join(', ')}`;
  const why = `backup ${manifest.name} of cluster ${manifest.clusterId} ${theirs}; none is an initial member of this pod (${initial
    .map((i) => `${i.name}=${i.peerURL}`)
    .join(', ')})`;
  if (force) return { kind: 'forced', reason: `${why}: restored all the same, as ETCD_AGENT_RESTORE_FORCE asks` };
  return { kind: 'refused', reason: `${why}: not restoring another cluster's backup; set ETCD_AGENT_RESTORE_FORCE=true if it is meant` };
}
