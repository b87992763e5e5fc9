/**
 * Restores this pod's member from a backup, straight through, beside the (empty) data directory:
 *   1. choose the backup (restore-decision.ts `chooseBackup`: the one named, else the newest
 *      verified one, else the newest unverified one only when allowed), and refuse it unless it
 *      records one of this pod's initial members or the restore is forced (origin-decision.ts);
 *   2. stream its snapshot from the store into `<dataDir>.restore/snapshot.db`, through a sha256,
 *      and compare size and sum with the manifest's;
 *   3. run etcd's restore tool (restore-tool.ts) into `<dataDir>.restore/data`, as a member of a new
 *      cluster of this pod alone (`--initial-cluster name=peerURL`, the pod's token);
 *   4. rename `<dataDir>.restore/data` onto the data directory (an empty one is removed first) and
 *      fsync the parent;
 *   5. remove the rest of `<dataDir>.restore`.
 * One log line per step. The caller (prepare) then starts etcd on the restored data as on any data
 * directory that holds a member, and the other pods join it.
 *
 * Before anything is downloaded it checks that the rename can be done: the data directory must not be
 * a mount point (kube-inject mounts the volume one level up).
 *
 * Crash safety: nothing is written outside `<dataDir>.restore` before the rename, and the rename is
 * the one step that changes the data directory. A crash before it leaves the data directory empty
 * and a leftover `<dataDir>.restore`, which the next run removes (`removeRestoreLeftover`) before it
 * restores again; a crash after it leaves a data directory holding the restored member, which
 * prepare's normal rules start as is. A failed check (a sum that differs, no backup to take, the
 * tool's refusal, no room beside the data directory) removes `<dataDir>.restore` and leaves the data
 * directory as it was.
 *
 * Ownership: the files are made by the user prepare runs as, etcd's own user in a pod kube-inject
 * made; prepare run as root gives them the owner of the data directory (or of its parent when it
 * is missing), so an etcd of another user can open them.
 */
import { existsSync, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { BOOTSTRAP_MARKER, readDataDir } from '../etcd-data/data-dir';
import { crashPoint, crashPointWithChild } from '../lib/crash-point';
import { mountPoints } from '../lib/mount-points';
import type { Logger } from '../observability/logger';
import type { StoreLocation } from '../proto/store-location';
import { downloadHashed, LocalFileError, syncPath } from './download';
import { readBackups, snapshotKey } from './layout';
import { describeLocation, openStore } from './location';
import { decideOrigin } from './origin-decision';
import { chooseBackup, type RestoreMember } from './restore-decision';
import { restoreSnapshot, type RestoreTool } from './restore-tool';
import { StoreError } from './store';

/** What a restore takes: where from, which backup, and the member it makes. */
export interface RestoreRequest {
  location: StoreLocation;
  backup?: string;
  unverified: boolean;
  /** Restore a backup none of whose members is one of `initial` (origin-decision.ts). */
  force: boolean;
  /** This pod's initial members (`--initial-cluster`): the chosen backup must record one of them. */
  initial: readonly RestoreMember[];
  dataDir: string;
  name: string;
  peerURL: string;
  token: string;
}

/** What a restore did. */
export interface RestoreResult {
  backup: string;
  revision: number;
  memberId: string;
  clusterId: string;
}

/** A restore that cannot be done as asked; the data directory is as it was. */
export class RestoreError extends Error {
  constructor(
    readonly step: 'choose' | 'origin' | 'check' | 'store' | 'download' | 'disk' | 'restore' | 'place',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'RestoreError';
  }
}

/** The names inside `<dataDir>.restore`: the snapshot read back, and the tool's output. */
const SNAPSHOT_FILE = 'snapshot.db';
const RESTORED_DIR = 'data';

/** Where a restore works: the sibling `<dataDir>.restore`, on the same volume, so step 4 is a rename. */
export function restoreWorkDir(dataDir: string): string {
  return `${dataDir.replace(/\/+$/, '')}.restore`;
}

/**
 * Removes a `<dataDir>.restore` an earlier restore left (killed before its end); answers whether it
 * did. One that holds anything but what a restore writes is not this agent's: it is left, and an error
 * says so.
 */
export async function removeRestoreLeftover(dataDir: string, logger: Logger): Promise<boolean> {
  const work = restoreWorkDir(dataDir);
  let entries: string[];
  try {
    entries = await fsp.readdir(work);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw new RestoreError('check', `${work} cannot be read (${(err as Error).message}); move it away`, { cause: err });
  }
  const foreign = entries.filter((e) => e !== SNAPSHOT_FILE && e !== RESTORED_DIR);
  if (foreign.length > 0) {
    throw new RestoreError('check', `${work} holds ${foreign.join(', ')}, which a restore does not write: move it away`);
  }
  await fsp.rm(work, { recursive: true, force: true });
  await syncPath(path.dirname(work));
  logger.info('restore: removed what an unfinished restore left', { path: work, held: entries });
  return true;
}

/** Restores the backup `req` asks for into its empty data directory; see the module comment. */
export async function restoreBackup(req: RestoreRequest, tool: RestoreTool, logger: Logger): Promise<RestoreResult> {
  const work = restoreWorkDir(req.dataDir);
  await removeRestoreLeftover(req.dataDir, logger);
  const before = readDataDir(req.dataDir);
  if (before.kind !== 'empty')
    throw new RestoreError('check', `the data directory ${req.dataDir} is not empty (${before.kind}): not restoring over it`);
  await fsp.access(path.dirname(work), fsp.constants.W_OK | fsp.constants.X_OK).catch((err: Error) => {
    throw new RestoreError(
      'check',
      `the restore needs to write beside the data directory, and ${path.dirname(work)} is not writable: ${err.message}`,
      {
        cause: err,
      },
    );
  });
  // Before anything is downloaded: the last step renames the restored member onto the data directory.
  const unplaceable = await renameProblem(req.dataDir);
  if (unplaceable !== undefined) throw new RestoreError('check', unplaceable);
  const store = await openStore(req.location);
  try {
    const backups = await readBackups(store);
    const choice = chooseBackup(backups, { ...(req.backup === undefined ? {} : { name: req.backup }), unverified: req.unverified });
    if (choice.kind === 'none')
      throw new RestoreError('choose', `nothing to restore from ${describeLocation(req.location)}: ${choice.why}`);
    const manifest = choice.entry.manifest;
    logger.info('restore: chose a backup', {
      member: req.name,
      backup: manifest.name,
      why: choice.why,
      state: choice.entry.state,
      revision: manifest.revision,
      sizeBytes: manifest.sizeBytes,
      clusterId: manifest.clusterId,
      etcdVersion: manifest.etcdVersion,
      store: store.description,
    });
    // Before anything is written: another cluster's backup is refused with the data directory as it was.
    const origin = decideOrigin(manifest, req.initial, req.force);
    if (origin.kind === 'refused') throw new RestoreError('origin', origin.reason);
    if (origin.kind === 'forced') logger.warn("restore: another cluster's backup, forced", { member: req.name, reason: origin.reason });

    await fsp.mkdir(work, { mode: 0o700 }).catch((err: unknown) => {
      throw new LocalFileError(work, err);
    });
    try {
      const file = path.join(work, SNAPSHOT_FILE);
      let firstWritten = false;
      const got = await downloadHashed(store, snapshotKey(manifest.name), file, {
        // Tests kill prepare here, with part of the snapshot in the file.
        onWritten: () => {
          if (!firstWritten) crashPoint('restore-downloading');
          firstWritten = true;
        },
      });
      if (got.size !== manifest.sizeBytes || got.sha256 !== manifest.sha256) {
        throw new RestoreError(
          'download',
          `backup ${manifest.name} read back holds ${got.size} bytes with sha256 ${got.sha256}; its manifest says ${manifest.sizeBytes} bytes, ${manifest.sha256}: not restoring it`,
        );
      }
      logger.info('restore: downloaded the snapshot, sha256 as in the manifest', {
        member: req.name,
        backup: manifest.name,
        file,
        sha256: got.sha256,
      });
      crashPoint('restore-downloaded');

      const restored = path.join(work, RESTORED_DIR);
      await restoreSnapshot(
        tool,
        file,
        restored,
        { name: req.name, peerURL: req.peerURL, initialCluster: `${req.name}=${req.peerURL}`, token: req.token },
        // Tests kill prepare and the tool together here, once the tool has begun writing its output.
        { started: (child) => crashPointWithChild('restore-tool-running', child, () => existsSync(restored)) },
      ).catch((err: Error) => {
        throw new RestoreError('restore', err.message, { cause: err });
      });
      const made = readDataDir(restored);
      if (made.kind !== 'member') throw new RestoreError('restore', `${tool.describe} left no member in ${restored} (${made.kind})`);
      await giveOwner(restored, req.dataDir);
      logger.info('restore: restored the snapshot into a new member', {
        member: req.name,
        tool: tool.describe,
        path: restored,
        memberId: made.memberId,
        clusterId: made.clusterId,
      });
      crashPoint('restore-tool-done');

      await place(restored, req.dataDir);
      logger.info('restore: renamed the restored member into the data directory', { member: req.name, dataDir: req.dataDir });
      crashPoint('restore-renamed');
      await fsp.rm(work, { recursive: true, force: true });
      await syncPath(path.dirname(work));
      logger.info('restore: done', { member: req.name, backup: manifest.name, memberId: made.memberId, clusterId: made.clusterId });
      return { backup: manifest.name, revision: manifest.revision, memberId: made.memberId, clusterId: made.clusterId };
    } catch (err) {
      // Nothing is kept of a restore that did not reach the data directory.
      if (readDataDir(req.dataDir).kind === 'empty') await fsp.rm(work, { recursive: true, force: true });
      throw err;
    }
  } catch (err) {
    // A store that answers but refuses (credentials, no bucket, an object gone) will not change by
    // itself: the restore fails; one that does not answer is waited for (a retryable StoreError).
    if (err instanceof StoreError && !err.retryable) throw new RestoreError('store', err.message, { cause: err });
    // The volume beside the data directory (full, read-only, not writable) is no store's fault, and
    // no wait mends it.
    if (err instanceof LocalFileError) {
      throw new RestoreError(
        'disk',
        `${err.message} (the data directory's volume, not the store): free room there or let prepare write it`,
        {
          cause: err,
        },
      );
    }
    throw err;
  } finally {
    store.close();
  }
}

/**
 * Why the restored member, written beside the data directory, could not be renamed onto it, or
 * undefined when it can: a data directory that is a mount point (of another file system, or a bind
 * mount) can be neither removed nor replaced by a rename.
 */
async function renameProblem(dataDir: string): Promise<string | undefined> {
  const parent = path.dirname(dataDir);
  const own = await fsp.stat(dataDir).catch(() => undefined);
  // Missing: the rename makes it, in its parent, where the restore writes.
  if (own === undefined) return undefined;
  const up = await fsp.stat(parent);
  const mounted =
    own.dev !== up.dev || mountPoints(await fsp.readFile('/proc/self/mountinfo', 'utf8').catch(() => '')).has(await fsp.realpath(dataDir));
  if (!mounted) return undefined;
  return `the data directory ${dataDir} is a mount point: a restore puts the restored member in place by a rename, which cannot replace a mount point; mount the volume at ${parent} (the data directory inside it), as kube-inject does`;
}

/** Renames `restored` onto `dataDir`, which must be missing or empty (the bootstrap marker aside), then fsyncs the parent. */
async function place(restored: string, dataDir: string): Promise<void> {
  const entries = await fsp.readdir(dataDir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (entries !== undefined) {
    const others = entries.filter((e) => e !== BOOTSTRAP_MARKER);
    if (others.length > 0)
      throw new RestoreError('place', `the data directory ${dataDir} is no longer empty (${others.join(', ')}): not restoring over it`);
    // A marker of a bootstrap never started: a restored member is no bootstrap.
    await fsp.rm(path.join(dataDir, BOOTSTRAP_MARKER), { force: true });
    await fsp.rmdir(dataDir).catch((err: Error) => {
      throw new RestoreError(
        'place',
        `the empty data directory ${dataDir} could not be removed to put the restored member there: ${err.message}`,
        {
          cause: err,
        },
      );
    });
  }
  // Tests kill prepare here: the data directory gone, the restored one not yet in its place.
  crashPoint('restore-placing');
  await fsp.rename(restored, dataDir).catch((err: Error) => {
    throw new RestoreError('place', `the restored member could not be renamed onto ${dataDir}: ${err.message}`, { cause: err });
  });
  await syncPath(path.dirname(dataDir));
}

/** Run as root, gives every restored entry the owner of the data directory (or of its parent): the user etcd runs as. */
async function giveOwner(restored: string, dataDir: string): Promise<void> {
  if (process.getuid?.() !== 0) return;
  const owner = await fsp.stat(dataDir).catch(() => fsp.stat(path.dirname(dataDir)));
  if (owner.uid === 0 && owner.gid === 0) return;
  const walk = async (entry: string): Promise<void> => {
    await fsp.lchown(entry, owner.uid, owner.gid);
    if ((await fsp.lstat(entry)).isDirectory()) for (const name of await fsp.readdir(entry)) await walk(path.join(entry, name));
  };
  await walk(restored);
}
