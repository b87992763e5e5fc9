/**
 * `backup --to -`: one snapshot of a healthy voter, a follower first, streamed to a writable (stdout)
 * for a backup tool that stores it (KubeBlocks' datasafed). No store, no lock and no manifest: the
 * tool that stores it keeps its own record. The stream is etcd's snapshot format whole, its sha256
 * trailer included, as `etcdutl snapshot restore` reads it; what was streamed is said on stderr.
 */
import type { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { EtcdCluster } from '../etcd/cluster-client';
import type { Deadline } from '../lib/deadline';
import { chooseSource } from './take';

/** What was streamed. */
export interface StreamedSnapshot {
  member: string;
  /** The member's revision just before the snapshot: every write at or below it is in it. */
  revision: number;
  clusterId: string;
  sizeBytes: number;
}

/** Streams one snapshot into `out`. */
export async function streamSnapshot(
  cluster: EtcdCluster,
  out: Writable,
  options: { deadline: Deadline; statusTimeoutMs: number; signal: AbortSignal },
): Promise<StreamedSnapshot> {
  const source = await chooseSource({ cluster, statusTimeoutMs: options.statusTimeoutMs }, options.deadline);
  const before = await cluster.memberStatus(source.clientURL, options.statusTimeoutMs);
  const snapshot = await cluster.snapshot(source.clientURL, options.signal);
  let sizeBytes = 0;
  snapshot.bytes.on('data', (chunk: Buffer) => (sizeBytes += chunk.length));
  await pipeline(snapshot.bytes, out, { end: false });
  await snapshot.header;
  return { member: source.member.name, revision: before.revision, clusterId: source.clusterId, sizeBytes };
}
