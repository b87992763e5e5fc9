/**
 * Wire shapes of the backup calls (docs/api.md §11): a backup's manifest as it is stored beside its
 * snapshot, its verification record, and the answers of POST /v1/backups, GET /v1/backups and
 * POST /v1/backups/verify. Pure.
 */
import { z } from 'zod';
import { MAX_TIMEOUT_SECONDS } from './kbagent';

/** What a verification found: the snapshot read back, checked and restored into a scratch directory. */
export const verificationSchema = z.union([
  z
    .object({
      ok: z.literal(true),
      verifiedAt: z.string(),
      durationMs: z.number().int().min(0),
      /** The revision of the restored data (etcd's `meta` bucket `consistent_index` aside: the key space's newest revision). */
      revision: z.number().int().min(0),
      /** Keys in the restored key space (every revision of every key counts once per key). */
      keys: z.number().int().min(0),
      /** The restore tool that opened it (`etcdutl 3.6.16`, `etcdctl 3.4.23`). */
      tool: z.string(),
    })
    .strict(),
  z
    .object({
      ok: z.literal(false),
      verifiedAt: z.string(),
      durationMs: z.number().int().min(0),
      /** Which check failed: the object's sha256, etcd's own hash at the snapshot's end, or the restore. */
      check: z.enum(['sha256', 'etcd-hash', 'restore', 'read']),
      error: z.string(),
    })
    .strict(),
]);

/** A verification record. */
export type Verification = z.infer<typeof verificationSchema>;

/** The manifest written beside a snapshot once the snapshot object is whole: a backup is the pair. */
export const manifestSchema = z
  .object({
    format: z.literal(1),
    name: z.string().min(1),
    clusterId: z.string().min(1),
    /** The source member's revision from its Status just before the snapshot began: every write at or below it is in the snapshot. */
    revision: z.number().int().min(0),
    etcdVersion: z.string(),
    member: z.object({ id: z.string(), name: z.string(), clientURL: z.string() }).strict(),
    /**
     * The cluster's members when it was taken, by name and peer URLs: what a restore checks that the
     * backup is its cluster's against (backup/origin-decision.ts). Absent in an older agent's manifest.
     */
    members: z.array(z.object({ name: z.string(), peerURLs: z.array(z.string()) }).strict()).optional(),
    /** The agent that took it. */
    agent: z.string(),
    sizeBytes: z.number().int().min(0),
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
    startedAt: z.string(),
    finishedAt: z.string(),
    durationMs: z.number().int().min(0),
    verification: verificationSchema.optional(),
  })
  .strict();

/** A backup's manifest. */
export type Manifest = z.infer<typeof manifestSchema>;

/** How a backup listed by GET /v1/backups stands. */
export type VerificationState = 'verified' | 'failed' | 'unverified';

/** One backup as GET /v1/backups lists it: its manifest and where it stands. */
export interface BackupEntry {
  name: string;
  state: VerificationState;
  manifest: Manifest;
}

/** The answer of POST /v1/backups. */
export interface BackupResult {
  action: 'backup';
  outcome: 'created' | 'in-progress';
  /** The new backup's manifest (`created`). */
  manifest?: Manifest;
  /** The verification run right after it, when it ran. */
  verification?: Verification;
  /** Why the verification right after it could not run (no verdict: the backup stays unverified). */
  verificationNotRun?: string;
  /** Backups retention removed after this one. */
  removed: string[];
  /** Unfinished uploads of killed runs that this run aborted. */
  abortedUploads: string[];
  /** Who is taking one now (`in-progress`: another agent holds the lock). */
  runningElsewhere?: { agent: string; startedAt: string };
  durationMs: number;
}

/** The body of POST /v1/backups: all optional. */
export const backupRequestSchema = z
  .object({
    /** Verify it right after (default true). */
    verify: z.boolean().optional(),
    timeoutSeconds: z.number().int('must be a whole number').min(1).max(MAX_TIMEOUT_SECONDS).optional(),
  })
  .strict();

/** A parsed POST /v1/backups body. */
export type BackupRequest = z.infer<typeof backupRequestSchema>;

/** The body of POST /v1/backups/verify: the backup to verify, the newest when absent. */
export const verifyRequestSchema = z
  .object({
    name: z.string().min(1).max(200).optional(),
    timeoutSeconds: z.number().int('must be a whole number').min(1).max(MAX_TIMEOUT_SECONDS).optional(),
  })
  .strict();

/** A parsed POST /v1/backups/verify body. */
export type VerifyRequest = z.infer<typeof verifyRequestSchema>;
