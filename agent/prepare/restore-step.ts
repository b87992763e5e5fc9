/**
 * prepare's side of a restore from a backup (backup/restore.ts does it, backup/restore-decision.ts
 * says when): the restore tool, looked for once a restore is decided; the restore a pod's answer
 * tells its peers; what a restore killed before its end left beside the data directory; and the step.
 *
 * Invariant: only the init container restores (the sidecar's passes never decide it). The tool is
 * needed only then: a pod whose data is there, or that joins, starts without one, whatever the
 * restore setting; a restore decided without a usable tool stops prepare before the restore has
 * changed anything (exit 2).
 */
import type { RestoreAsk } from '../backup/restore-decision';
import { describeRestore, initialClusterText } from '../backup/restore-decision';
import { removeRestoreLeftover, restoreBackup, RestoreError } from '../backup/restore';
import { findRestoreTool, type RestoreTool } from '../backup/restore-tool';
import type { Logger } from '../observability/logger';
import type { PrepareOptions } from './options';

/** A restore was decided and no usable restore tool is there (logged): prepare exits 2, nothing changed. */
export class NoRestoreToolError extends Error {
  constructor() {
    super('prepare cannot restore: no usable restore tool');
    this.name = 'NoRestoreToolError';
  }
}

/**
 * The restore tool, looked for when a restore is decided, or `bad` after logging why none can be
 * used: then prepare exits 2 with nothing changed.
 */
export async function restoreToolOf(opts: PrepareOptions, logger: Logger): Promise<RestoreTool | 'bad'> {
  if (opts.restore === undefined) return 'bad';
  try {
    // It refuses etcdctl 3.6 and later, which has no snapshot restore.
    const tool = await findRestoreTool(opts.restore.tool);
    logger.info('a restore is decided; its tool is there', {
      member: opts.self.name,
      restore: describeRestore(opts.restore),
      unverified: opts.restore.unverified,
      force: opts.restore.force,
      tool: tool.describe,
    });
    return tool;
  } catch (err) {
    logger.error('prepare cannot restore: no usable restore tool; nothing was changed', {
      member: opts.self.name,
      variable: 'ETCD_AGENT_ETCDUTL',
      reason: err instanceof Error ? err.message : String(err),
    });
    return 'bad';
  }
}

/**
 * The restore this pod's answer reports to its peers (`GET /v1/prepare`), with the initial cluster it
 * was given (the restorer checks that its peers were given the same), or null.
 */
export function restoreAnswer(opts: PrepareOptions): RestoreAsk | null {
  if (opts.restore === undefined) return null;
  return {
    source: opts.restore.source,
    ...(opts.restore.backup === undefined ? {} : { backup: opts.restore.backup }),
    initialCluster: initialClusterText(opts.initial),
  };
}

/**
 * Removes what a restore killed before its end left beside the data directory: never needed again,
 * whatever the data directory holds now. A `<dataDir>.restore` holding what a restore does not write
 * is left alone, with a warning; a restore asked for then fails on it (RestoreError).
 */
export async function clearRestoreLeftover(opts: PrepareOptions, logger: Logger): Promise<void> {
  await removeRestoreLeftover(opts.dataDir, logger).catch((err: unknown) => {
    if (opts.restore !== undefined || !(err instanceof RestoreError)) throw err;
    logger.warn('left alone beside the data directory', { member: opts.self.name, reason: err.message });
  });
}

/** The restore step: the backup asked for, restored into this pod's empty data directory as a member of its own. */
export async function actRestore(opts: PrepareOptions, tool: RestoreTool | undefined, logger: Logger): Promise<string> {
  if (opts.restore === undefined || tool === undefined) return 'a restore was decided, but this process has no restore tool';
  await restoreBackup(
    {
      location: opts.restore.location,
      ...(opts.restore.backup === undefined ? {} : { backup: opts.restore.backup }),
      unverified: opts.restore.unverified,
      force: opts.restore.force,
      initial: opts.initial,
      dataDir: opts.dataDir,
      name: opts.self.name,
      peerURL: opts.self.peerURL,
      token: opts.token,
    },
    tool,
    logger,
  );
  return '';
}
