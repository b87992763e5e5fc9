/**
 * etcd's Snapshot RPC of one member as a byte stream: the member's whole backend, followed by the
 * 32-byte sha256 etcd appends (what `etcdutl snapshot restore` checks). The gRPC stream is read with
 * backpressure, so a slow store slows the member's sending instead of filling memory. `header`
 * resolves with the first message's header once it came (the stream has started); etcd fills it at
 * each send, so its revision may be later than the snapshot's content: take the member's Status
 * revision before opening it as the revision every write at or below is in.
 *
 * etcd3's own `maintenance.snapshot()` passes the auth metadata where gRPC takes the request, so the
 * call is made here on the pool's connection with the metadata in its place (etcd asks for root
 * rights for a snapshot when auth is on).
 */
import { Transform, type Readable } from 'node:stream';
import type { Etcd3 } from 'etcd3';
import { toAgentError } from './errors';

/** What the first message of the stream said. */
export interface SnapshotHeader {
  revision: number;
  memberId: string;
  clusterId: string;
}

/** An open snapshot: its bytes, and its header once the first message came. */
export interface SnapshotStream {
  bytes: Readable;
  header: Promise<SnapshotHeader>;
}

interface SnapshotMessage {
  header?: { revision?: string; member_id?: string; cluster_id?: string };
  blob?: Buffer;
}

interface GrpcStream extends Readable {
  cancel(): void;
}

interface PoolLike {
  withConnection<T>(
    service: string,
    fn: (c: { client: Record<string, (...args: unknown[]) => GrpcStream>; metadata: unknown }) => T,
  ): Promise<T>;
}

/** Opens the Snapshot RPC of the member `client` talks to; `signal` cancels it. */
export async function openSnapshot(client: Etcd3, signal: AbortSignal): Promise<SnapshotStream> {
  const pool = (client.maintenance as unknown as { client: PoolLike }).client;
  const call = await pool.withConnection('Maintenance', ({ client: grpc, metadata }) => grpc.snapshot({}, metadata, {}));
  let resolveHeader!: (h: SnapshotHeader) => void;
  let rejectHeader!: (err: unknown) => void;
  const header = new Promise<SnapshotHeader>((resolve, reject) => {
    resolveHeader = resolve;
    rejectHeader = reject;
  });
  header.catch(() => undefined);
  let first = true;
  const bytes = new Transform({
    writableObjectMode: true,
    transform(message: SnapshotMessage, _encoding, done) {
      if (first) {
        first = false;
        resolveHeader({
          revision: Number(message.header?.revision ?? 0),
          memberId: BigInt(message.header?.member_id ?? 0).toString(16),
          clusterId: BigInt(message.header?.cluster_id ?? 0).toString(16),
        });
      }
      done(null, message.blob !== undefined && message.blob.length > 0 ? message.blob : undefined);
    },
  });
  const fail = (err: unknown): void => {
    const agentError = toAgentError(err);
    rejectHeader(agentError);
    bytes.destroy(agentError);
  };
  call.on('error', fail);
  call.on('end', () => {
    if (first) fail(new Error('the snapshot stream ended before its first message'));
  });
  call.pipe(bytes);
  const abort = (): void => {
    call.cancel();
    fail(signal.reason ?? new Error('the snapshot was cancelled'));
  };
  if (signal.aborted) abort();
  else signal.addEventListener('abort', abort, { once: true });
  bytes.on('close', () => {
    signal.removeEventListener('abort', abort);
    if (!call.readableEnded) call.cancel();
  });
  return { bytes, header };
}
