/**
 * A streamed upload into S3 whose memory is two parts, whatever the stream's size: the body is
 * copied into one of two part buffers, allocated once per upload and reused. While one part is being
 * sent, the next is filled; once it is full, the body is not read again until the part in flight is
 * acknowledged, so the writer upstream (etcd's Snapshot RPC) is slowed by the store's pace.
 *
 * Rule: an upload allocates its part buffers once and reuses them, never one buffer per part. Node
 * frees such buffers only at a full garbage collection, which V8 starts only once external memory
 * has grown by about 64 MiB: a buffer per part (as lib-storage's `Upload` allocates) lets resident
 * memory grow by that much, a third of the sidecar's limit.
 *
 * Invariant: a stream shorter than one part is one PutObject; a longer one is a multipart upload
 * that is completed only once every part is acknowledged, and aborted (without the caller's signal,
 * so it still goes out) before the upload rejects, whatever made it fail.
 */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import type { Readable } from 'node:stream';

/** Where the object goes, and the size of each part but the last. */
export interface UploadTarget {
  bucket: string;
  key: string;
  partSize: number;
}

/** Uploads `body` into `target` (see the module comment); answers the bytes sent. */
export async function uploadInParts(client: S3Client, target: UploadTarget, body: Readable, signal?: AbortSignal): Promise<number> {
  const { bucket, key, partSize } = target;
  const options = signal === undefined ? {} : { abortSignal: signal };
  const buffers = [Buffer.allocUnsafe(partSize), Buffer.allocUnsafe(partSize)];
  let filling = 0;
  let filled = 0;
  let sizeBytes = 0;
  let uploadId: string | undefined;
  const parts: { PartNumber: number; ETag: string }[] = [];
  let inFlight: Promise<void> | undefined;
  let failure: { error: unknown } | undefined;

  const sendPart = async (bytes: Buffer): Promise<void> => {
    if (uploadId === undefined) {
      const created = await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }), options);
      if (created.UploadId === undefined) throw new Error('CreateMultipartUpload answered no UploadId');
      uploadId = created.UploadId;
    }
    const PartNumber = parts.length + 1;
    // Its place is taken now, so parts are listed in order whatever finishes first.
    const part = { PartNumber, ETag: '' };
    parts.push(part);
    const answer = await client.send(
      new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: uploadId, PartNumber, Body: bytes, ContentLength: bytes.length }),
      options,
    );
    if (answer.ETag === undefined) throw new Error(`UploadPart ${PartNumber} answered no ETag`);
    part.ETag = answer.ETag;
  };
  /** Waits for the part in flight; rethrows its failure. */
  const settle = async (): Promise<void> => {
    await inFlight;
    inFlight = undefined;
    if (failure !== undefined) throw failure.error;
  };
  /** Sends the full buffer (after the part before it) and switches to the other one. */
  const flush = async (): Promise<void> => {
    await settle();
    const bytes = buffers[filling].subarray(0, filled);
    inFlight = sendPart(bytes).catch((error: unknown) => {
      failure = { error };
    });
    filling = 1 - filling;
    filled = 0;
  };

  try {
    for await (const chunk of body) {
      const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
      sizeBytes += bytes.length;
      for (let at = 0; at < bytes.length;) {
        const copied = bytes.copy(buffers[filling], filled, at, Math.min(bytes.length, at + partSize - filled));
        filled += copied;
        at += copied;
        if (filled === partSize) await flush();
      }
      if (failure !== undefined) throw failure.error;
    }
    await settle();
    if (uploadId === undefined && parts.length === 0) {
      const bytes = buffers[filling].subarray(0, filled);
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: bytes, ContentLength: bytes.length }), options);
      return sizeBytes;
    }
    if (filled > 0) await flush();
    await settle();
    await client.send(
      new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId, MultipartUpload: { Parts: parts } }),
      options,
    );
    return sizeBytes;
  } catch (err) {
    await inFlight;
    if (uploadId !== undefined) {
      // Without the signal: a failed or aborted upload must still clean up after itself.
      await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId })).catch(() => undefined);
    }
    throw err;
  }
}
