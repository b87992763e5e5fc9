/**
 * Proves one backup restorable, as a restore would use it: its snapshot is read back from the store
 * into a scratch directory, its sha256 compared with the manifest's, etcd's own sha256 at the end of
 * the snapshot checked, then it is restored with etcd's restore tool (restore-tool.ts) and the
 * restored backend opened to count its keys and read its revision. The result is written into the
 * manifest as its verification record, so every agent and a later restore see it. The scratch
 * directory is removed whatever happens.
 *
 * Verifications run outside the cluster lock, so another agent's retention may remove the backup
 * meanwhile. The record is written, then the snapshot is looked for: when it is gone, the record is
 * removed again; when the record could not be written because its place went with the backup, there
 * is none to remove. Either way the answer is `not-found`, never a verdict on a backup that is no
 * longer there, nor a store failure.
 * A removal that ends between that look and retention's own removal of the snapshot leaves a
 * manifest without its snapshot, which retention removes after the orphans' grace
 * (retention-decision.ts).
 *
 * A step that fails for the machine's sake (no room or no write access for scratch, the tool missing,
 * killed or out of time: verify-decision.ts) is no verdict: nothing is written, and the caller gets a
 * `could-not-run` error saying why. Neither is a store that does not answer, nor the agent's stop.
 */
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { readKeySpace } from '../etcd-data/key-space';
import type { Logger } from '../observability/logger';
import type { BackupEntry, Manifest, Verification } from '../proto/backup';
import { AgentError } from '../proto/errors';
import { downloadHashed, LocalFileError } from './download';
import { manifestBytes, manifestKey, snapshotKey } from './layout';
import { restoreSnapshot, RestoreToolError, type RestoreTool } from './restore-tool';
import { StoreError, type BackupStore } from './store';
import { judgeStepFailure, type StepFailure, type VerifyStep } from './verify-decision';

/** What a verification needs. */
export interface VerifyDeps {
  store: BackupStore;
  tool: RestoreTool;
  /** Where scratch directories are made (the OS's temporary directory by default). */
  scratchRoot?: string;
  /** Gets one line per step passed, so a long verification shows where it is. */
  logger?: Logger;
}

/** etcd appends the sha256 of the backend to the snapshot it streams. */
const ETCD_HASH_BYTES = 32;

/** Verifies `entry`, records the result in its manifest and answers the manifest as written. */
export async function verifyBackup(deps: VerifyDeps, entry: BackupEntry, signal?: AbortSignal): Promise<Manifest> {
  const started = performance.now();
  const verification = await check(deps, entry.manifest, signal, started);
  const manifest: Manifest = { ...entry.manifest, verification };
  const removed = (): AgentError =>
    new AgentError(
      'not-found',
      `backup ${entry.name} was removed from ${deps.store.description} while it was verified (by retention, on this agent or another); its verification is not recorded`,
      { details: { name: entry.name } },
    );
  try {
    await deps.store.put(manifestKey(entry.name), manifestBytes(manifest));
  } catch (err) {
    // A directory store's folder removed by retention while the record was being written into it.
    if (err instanceof StoreError && err.failure === 'not-found' && !(await hasSnapshot(deps.store, entry.name))) throw removed();
    throw err;
  }
  if (!(await hasSnapshot(deps.store, entry.name))) {
    await deps.store.remove([manifestKey(entry.name)]);
    throw removed();
  }
  return manifest;
}

async function hasSnapshot(store: BackupStore, name: string): Promise<boolean> {
  return (await store.list(`${name}/`)).some((o) => o.key === snapshotKey(name));
}

/** A verification that could not run here (verify-decision.ts): no verdict on the backup. */
export function couldNotRun(name: string, reason: string, cause?: unknown): AgentError {
  return new AgentError('unavailable', `the verification of backup ${name} could not run: ${reason}`, {
    retryable: false,
    details: { step: 'verify', verification: 'could-not-run' },
    cause,
  });
}

async function check(deps: VerifyDeps, manifest: Manifest, signal: AbortSignal | undefined, started: number): Promise<Verification> {
  const failed = (checked: 'sha256' | 'etcd-hash' | 'restore' | 'read', error: string): Verification => ({
    ok: false,
    verifiedAt: new Date().toISOString(),
    durationMs: Math.round(performance.now() - started),
    check: checked,
    error,
  });
  /** The verdict on a failed step, or the could-not-run error it is; a stop or a store's failure is rethrown. */
  const judged = (step: VerifyStep, err: unknown): Verification => {
    if (signal?.aborted === true || err instanceof StoreError) throw err;
    const verdict = judgeStepFailure(stepFailure(step, err));
    if (verdict.kind === 'could-not-run') throw couldNotRun(manifest.name, verdict.reason, err);
    return failed(verdict.check, verdict.error);
  };
  let scratch: string;
  try {
    scratch = await fsp.mkdtemp(path.join(deps.scratchRoot ?? os.tmpdir(), 'etcd-backup-verify-'));
  } catch (err) {
    return judged('scratch', err);
  }
  try {
    const file = path.join(scratch, 'snapshot.db');
    let got: { sha256: string; size: number; hashProblem?: string };
    try {
      // A store that does not answer is no verdict on the backup: its StoreError goes to the caller.
      const { sha256, size } = await downloadHashed(deps.store, snapshotKey(manifest.name), file, { signal });
      got = { sha256, size, hashProblem: await etcdHashProblem(file, size) };
    } catch (err) {
      return judged('scratch', err);
    }
    const { sha256, size, hashProblem } = got;
    if (size !== manifest.sizeBytes || sha256 !== manifest.sha256) {
      return failed(
        'sha256',
        `the snapshot read back holds ${size} bytes with sha256 ${sha256}; the manifest says ${manifest.sizeBytes} bytes, ${manifest.sha256}`,
      );
    }
    if (hashProblem !== undefined) return failed('etcd-hash', hashProblem);
    deps.logger?.info('backup verification: read back', { name: manifest.name, sizeBytes: size, sha256 });
    const dataDir = path.join(scratch, 'data');
    try {
      await restoreSnapshot(deps.tool, file, dataDir, { name: 'verify', peerURL: 'http://127.0.0.1:2380' }, { signal });
    } catch (err) {
      return judged('restore', err);
    }
    deps.logger?.info('backup verification: restored', { name: manifest.name, tool: deps.tool.describe });
    let space: { revision: number; keys: number };
    try {
      space = await readKeySpace(path.join(dataDir, 'member', 'snap', 'db'));
    } catch (err) {
      return judged('read', err);
    }
    deps.logger?.info('backup verification: read the key space', { name: manifest.name, revision: space.revision, keys: space.keys });
    return {
      ok: true,
      verifiedAt: new Date().toISOString(),
      durationMs: Math.round(performance.now() - started),
      revision: space.revision,
      keys: space.keys,
      tool: deps.tool.describe,
    };
  } finally {
    await fsp.rm(scratch, { recursive: true, force: true });
  }
}

/** What the rule of verify-decision.ts reads of a step's error. */
function stepFailure(step: VerifyStep, err: unknown): StepFailure {
  if (err instanceof RestoreToolError) {
    const { errno, signal, timedOut, said } = err.ended;
    return { step, said, timedOut, ...(errno === undefined ? {} : { errno }), ...(signal === undefined ? {} : { signal }) };
  }
  const code = err instanceof LocalFileError ? err.errno : (err as NodeJS.ErrnoException).code;
  return { step, said: err instanceof Error ? err.message : String(err), ...(typeof code === 'string' ? { errno: code } : {}) };
}

/** Why etcd's trailing sha256 does not match the backend before it, or undefined when it does. */
async function etcdHashProblem(file: string, size: number): Promise<string | undefined> {
  if (size <= ETCD_HASH_BYTES) return `the snapshot is only ${size} bytes`;
  const hash = createHash('sha256');
  const handle = await fsp.open(file, 'r');
  try {
    const buffer = Buffer.allocUnsafe(1 << 20);
    let at = 0;
    const end = size - ETCD_HASH_BYTES;
    while (at < end) {
      const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, end - at), at);
      if (bytesRead === 0) return `the snapshot ended at ${at} bytes while reading it back`;
      hash.update(buffer.subarray(0, bytesRead));
      at += bytesRead;
    }
    const trailer = Buffer.alloc(ETCD_HASH_BYTES);
    await handle.read(trailer, 0, ETCD_HASH_BYTES, end);
    const computed = hash.digest();
    return computed.equals(trailer)
      ? undefined
      : `etcd's sha256 at the end of the snapshot (${trailer.toString('hex')}) is not that of the backend before it (${computed.toString('hex')})`;
  } finally {
    await handle.close();
  }
}
