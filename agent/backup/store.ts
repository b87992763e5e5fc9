/**
 * What a backup store is to the rest of the agent: a flat key space of objects under one prefix, with
 * a streamed upload that becomes visible only when whole, small atomic puts, reads, a listing, and
 * the abort of uploads a killed run left unfinished. The S3 store (s3-store.ts) and the directory
 * store (dir-store.ts) are the two kinds; location.ts opens one from its URL.
 *
 * Invariant: an object is listed only once its upload is whole, so a reader can never take half a
 * snapshot for a snapshot. Errors are `StoreError`s, whose reason says what an operator fixes.
 */
import type { Readable } from 'node:stream';
import { AgentError } from '../proto/errors';

/** An object of the store. */
export interface StoredObject {
  /** Its key, relative to the store's prefix. */
  key: string;
  sizeBytes: number;
  modifiedAt: Date;
}

/** A backup store; keys are relative to the store's own prefix. */
export interface BackupStore {
  /** Where it is, for logs and answers (no credential in it). */
  readonly description: string;
  /** Streams `body` into `key` (a multipart upload on S3); the object appears only when whole. Memory stays flat. */
  upload(key: string, body: Readable, signal?: AbortSignal): Promise<{ sizeBytes: number }>;
  /** Writes a small object at once (the manifest): a reader sees the old one or the new one. */
  put(key: string, body: Buffer): Promise<void>;
  /** Streams `key` back; a StoreError `not-found` when it is not there. */
  download(key: string, signal?: AbortSignal): Promise<Readable>;
  /** A small object's bytes, or undefined when it is not there. */
  read(key: string): Promise<Buffer | undefined>;
  /** The whole objects whose key starts with `prefix`, in key order. */
  list(prefix: string): Promise<StoredObject[]>;
  /** Removes the objects (a missing one is not an error). */
  remove(keys: string[]): Promise<void>;
  /**
   * Aborts the unfinished uploads under `prefix` that started before `olderThan` (a killed run's);
   * answers their keys. Never a put that may be writing now: puts also run outside the cluster lock.
   */
  abortUnfinished(prefix: string, olderThan: Date): Promise<string[]>;
  /** Frees the connections. */
  close(): void;
}

/** Why a store call failed, in the words an operator acts on. */
export type StoreFailure =
  | 'unreachable' // the store did not answer, or refused the connection
  | 'timeout' // it answered too slowly for the call's deadline
  | 'credentials' // it refused the credentials (wrong key, expired token, no permission)
  | 'no-bucket' // the bucket (or the directory) does not exist
  | 'not-found' // the object does not exist
  | 'failed'; // anything else it answered

const RETRYABLE: Readonly<Record<StoreFailure, boolean>> = {
  unreachable: true,
  timeout: true,
  credentials: false,
  'no-bucket': false,
  'not-found': false,
  failed: true,
};

/** A failed store call, as an `unavailable` AgentError whose `details.store` names the failure. */
export class StoreError extends AgentError {
  constructor(
    readonly failure: StoreFailure,
    message: string,
    cause?: unknown,
  ) {
    super(failure === 'timeout' ? 'timeout' : failure === 'not-found' ? 'not-found' : 'unavailable', message, {
      retryable: RETRYABLE[failure],
      details: { store: failure },
      cause,
    });
  }
}

/** The failure a thrown value stands for: its own when it is a StoreError, else `failed`. */
export function storeFailureOf(err: unknown): StoreFailure {
  return err instanceof StoreError ? err.failure : 'failed';
}
