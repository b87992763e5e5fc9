/**
 * Proves one backup restorable, as a restore would use it: its snapshot is read back from the store
 * into a scratch directory, its sha256 compared with the manifest's, etcd's own sha256 at the end of
 * the snapshot checked, then it is restored with etcd's restore tool (restore-tool.ts) and the
 * restored backend opened to count its keys and read its revision. The result is written into the
 * manifest as its verification record, so every agent and a later restore see it. The scratch
 * directory is removed whatever happens.
 */
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { readKeySpace } from '../etcd-data/key-space';
import type { Logger } from '../observability/logger';
import type { BackupEntry, Manifest, Verification } from '../proto/backup';
import { downloadHashed } from './download';
import { manifestBytes, manifestKey, snapshotKey } from './layout';
import { restoreSnapshot, type RestoreTool } from './restore-tool';
import type { BackupStore } from './store';

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
  await deps.store.put(manifestKey(entry.name), manifestBytes(manifest));
  return manifest;
}

async function check(deps: VerifyDeps, manifest: Manifest, signal: AbortSignal | undefined, started: number): Promise<Verification> {
  const failed = (checked: 'sha256' | 'etcd-hash' | 'restore' | 'read', error: string): Verification => ({
    ok: false,
    verifiedAt: new Date().toISOString(),
    durationMs: Math.round(performance.now() - started),
    check: checked,
    error,
  });
  const scratch = await fsp.mkdtemp(path.join(deps.scratchRoot ?? os.tmpdir(), 'etcd-backup-verify-'));
  try {
    const file = path.join(scratch, 'snapshot.db');
    // A store that does not answer is no verdict on the backup: its StoreError goes to the caller.
    const { sha256, size } = await downloadHashed(deps.store, snapshotKey(manifest.name), file, { signal });
    if (size !== manifest.sizeBytes || sha256 !== manifest.sha256) {
      return failed(
        'sha256',
        `the snapshot read back holds ${size} bytes with sha256 ${sha256}; the manifest says ${manifest.sizeBytes} bytes, ${manifest.sha256}`,
      );
    }
    const hashProblem = await etcdHashProblem(file, size);
    if (hashProblem !== undefined) return failed('etcd-hash', hashProblem);
    deps.logger?.info('backup verification: read back', { name: manifest.name, sizeBytes: size, sha256 });
    const dataDir = path.join(scratch, 'data');
    try {
      await restoreSnapshot(deps.tool, file, dataDir, { name: 'verify', peerURL: 'http://127.0.0.1:2380' }, { signal });
    } catch (err) {
      // Stopped (the agent's shutdown): no verdict on the backup.
      if (signal?.aborted === true) throw err;
      return failed('restore', (err as Error).message);
    }
    deps.logger?.info('backup verification: restored', { name: manifest.name, tool: deps.tool.describe });
    let space: { revision: number; keys: number };
    try {
      space = await readKeySpace(path.join(dataDir, 'member', 'snap', 'db'));
    } catch (err) {
      return failed('read', `the restored data could not be opened: ${(err as Error).message}`);
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
