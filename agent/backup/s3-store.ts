/**
 * The backup store on an S3-compatible bucket (AWS, MinIO, Ceph, versitygw), every key under the
 * location's prefix. A snapshot goes up as a multipart upload of 8 MiB parts in two reused buffers
 * (s3-upload.ts), so memory stays flat whatever its size; the object exists only once
 * CompleteMultipartUpload has made it whole. Credentials come only from the SDK's default chain (environment, shared files, web
 * identity), and no message of this store ever holds one.
 *
 * Invariant: every call answers or throws a StoreError (s3-errors.ts says which failure) naming the
 * store and what it was doing; an upload that fails or is aborted aborts its own multipart upload
 * before it rejects, and one a killed run left behind is what `abortUnfinished` removes.
 */
import {
  AbortMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { addAbortSignal, PassThrough, Readable } from 'node:stream';
import { describeLocation, type S3Location } from '../proto/store-location';
import { s3ErrorText, s3Failure } from './s3-errors';
import { uploadInParts } from './s3-upload';
import { StoreError, type BackupStore, type StoredObject } from './store';

/** How long one HTTP request of the store may take. */
export interface S3Timeouts {
  /** To open the connection. */
  connectMs: number;
  /** From sending the request to the answer's headers; also the longest silence within a streamed body. */
  requestMs: number;
}

/** The timeouts of a store: a connection in 10 s, an answer (one 8 MiB part included) in 60 s. */
export const S3_TIMEOUTS: Readonly<S3Timeouts> = Object.freeze({ connectMs: 10_000, requestMs: 60_000 });

/** The part size of an upload: 10,000 parts (S3's limit) of it hold 80 GiB, far above etcd's quota. */
const PART_SIZE = 8 * 1024 * 1024;
/** DeleteObjects takes at most 1000 keys per request. */
const DELETE_BATCH = 1000;
/**
 * Attempts of each request, the first included: the SDK retries throttling, 5xx and dropped
 * connections with backoff; a caller's own retry (backup's schedule) comes on top, so keep it small.
 */
const MAX_ATTEMPTS = 3;

/** The store of one bucket and prefix. */
export class S3Store implements BackupStore {
  readonly description: string;
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(location: S3Location, timeouts: Readonly<S3Timeouts> = S3_TIMEOUTS) {
    this.description = describeLocation(location);
    this.bucket = location.bucket;
    this.prefix = location.prefix;
    this.client = new S3Client({
      ...(location.endpoint === undefined ? {} : { endpoint: location.endpoint }),
      // A store other than AWS rarely cares about the region, but SigV4 signs one.
      ...(location.region !== undefined ? { region: location.region } : location.endpoint !== undefined ? { region: 'us-east-1' } : {}),
      forcePathStyle: location.pathStyle,
      maxAttempts: MAX_ATTEMPTS,
      requestHandler: {
        connectionTimeout: timeouts.connectMs,
        requestTimeout: timeouts.requestMs,
        throwOnRequestTimeout: true,
        socketTimeout: timeouts.requestMs,
      },
      // Checksums only where S3 requires them: many S3-compatible stores refuse the SDK's newer
      // default trailing checksums, and the manifest's sha256 is what proves a snapshot whole.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  async upload(key: string, body: Readable, signal?: AbortSignal): Promise<{ sizeBytes: number }> {
    // The signal ends both the body being read and the request under way.
    const source = signal === undefined ? body : addAbortSignal(signal, body);
    try {
      return {
        sizeBytes: await uploadInParts(this.client, { bucket: this.bucket, key: this.prefix + key, partSize: PART_SIZE }, source, signal),
      };
    } catch (err) {
      body.destroy();
      throw this.failure(err, `uploading ${key}`, signal);
    }
  }

  async put(key: string, body: Buffer): Promise<void> {
    await this.call(`writing ${key}`, () =>
      this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.prefix + key, Body: body, ContentLength: body.length })),
    );
  }

  async download(key: string, signal?: AbortSignal): Promise<Readable> {
    const doing = `reading ${key}`;
    const answer = await this.call(
      doing,
      () => this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.prefix + key }), { abortSignal: signal }),
      signal,
    );
    if (!(answer.Body instanceof Readable)) throw new StoreError('failed', `${this.description}: ${doing}: the answer has no body stream`);
    // An error while the body streams reaches the reader as a StoreError too.
    const body = answer.Body;
    const out = new PassThrough();
    body.on('error', (err) => out.destroy(this.failure(err, doing, signal)));
    out.on('close', () => body.destroy());
    return body.pipe(out);
  }

  async read(key: string): Promise<Buffer | undefined> {
    const doing = `reading ${key}`;
    try {
      const answer = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.prefix + key }));
      if (answer.Body === undefined) return Buffer.alloc(0);
      return Buffer.from(await answer.Body.transformToByteArray());
    } catch (err) {
      const failure = this.failure(err, doing);
      if (failure.failure === 'not-found') return undefined;
      throw failure;
    }
  }

  async list(prefix: string): Promise<StoredObject[]> {
    const found: StoredObject[] = [];
    let token: string | undefined;
    do {
      const page = await this.call(`listing ${prefix === '' ? 'it' : prefix}`, () =>
        this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: this.prefix + prefix, ContinuationToken: token })),
      );
      for (const o of page.Contents ?? []) {
        // A key ending in "/" is a folder marker some stores list, never an object of ours.
        if (o.Key === undefined || o.Key.endsWith('/')) continue;
        found.push({ key: o.Key.slice(this.prefix.length), sizeBytes: o.Size ?? 0, modifiedAt: o.LastModified ?? new Date(0) });
      }
      token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
    return found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async remove(keys: string[]): Promise<void> {
    for (let at = 0; at < keys.length; at += DELETE_BATCH) {
      const batch = keys.slice(at, at + DELETE_BATCH);
      const doing = `removing ${batch.length === 1 ? batch[0] : `${batch.length} objects`}`;
      const answer = await this.call(doing, () =>
        this.client.send(
          new DeleteObjectsCommand({
            Bucket: this.bucket,
            Delete: { Objects: batch.map((k) => ({ Key: this.prefix + k })), Quiet: true },
          }),
        ),
      );
      // A key already gone is no error (S3 answers it as deleted); anything else is.
      const errors = (answer.Errors ?? []).filter((e) => e.Code !== 'NoSuchKey');
      if (errors.length > 0) {
        const first = errors[0];
        const why = new StoreError(
          s3Failure({ name: first.Code }),
          `${this.description}: ${doing}: ${errors.length} not removed, the first ${first.Key?.slice(this.prefix.length)}: ${first.Code}: ${first.Message}`,
        );
        throw why;
      }
    }
  }

  async abortUnfinished(prefix: string, olderThan: Date): Promise<string[]> {
    const aborted: string[] = [];
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    do {
      const page = await this.call(`listing the unfinished uploads under ${prefix === '' ? 'it' : prefix}`, () =>
        this.client.send(
          new ListMultipartUploadsCommand({
            Bucket: this.bucket,
            Prefix: this.prefix + prefix,
            KeyMarker: keyMarker,
            UploadIdMarker: uploadIdMarker,
          }),
        ),
      );
      for (const u of page.Uploads ?? []) {
        if (u.Key === undefined || u.UploadId === undefined || u.Initiated === undefined || u.Initiated >= olderThan) continue;
        const key = u.Key.slice(this.prefix.length);
        try {
          await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: u.Key, UploadId: u.UploadId }));
        } catch (err) {
          // Another agent's run may have aborted or finished it meanwhile.
          if (s3Failure(err) !== 'not-found') throw this.failure(err, `aborting the unfinished upload of ${key}`);
          continue;
        }
        aborted.push(key);
      }
      const more = page.IsTruncated === true;
      keyMarker = more ? page.NextKeyMarker : undefined;
      uploadIdMarker = more ? page.NextUploadIdMarker : undefined;
    } while (keyMarker !== undefined);
    return aborted;
  }

  close(): void {
    this.client.destroy();
  }

  /** Runs one SDK call, any error as a StoreError. */
  private async call<T>(doing: string, send: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    try {
      return await send();
    } catch (err) {
      throw this.failure(err, doing, signal);
    }
  }

  /** The StoreError of an SDK error; its cause keeps only the name and message (no answer body, no request). */
  private failure(err: unknown, doing: string, signal?: AbortSignal): StoreError {
    if (err instanceof StoreError) return err;
    const aborted = signal?.aborted === true;
    const failure = s3Failure(err, aborted);
    const text = aborted ? `the call's deadline passed (${s3ErrorText(err)})` : s3ErrorText(err);
    const cause = new Error(text);
    cause.name = err instanceof Error ? err.name : 'Error';
    return new StoreError(failure, `${this.description}: ${doing}: ${text}`, cause);
  }
}
