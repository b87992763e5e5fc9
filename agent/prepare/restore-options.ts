/**
 * prepare's restore options (docs/concepts/prepare.md "Restoring from a backup"): the store to
 * restore from, one backup by name, whether an unverified backup may be taken, and whether a backup
 * none of whose members is an initial member of this pod (another cluster's) may be. Pure: the raw
 * values go in, validated options or a ConfigError naming the variable come out.
 *
 * Invariant: a restore option without the store is an error, never ignored, and a restore asked for
 * without an initial cluster is one too (the initial member whose name sorts first restores).
 */
import type { RestoreAsk } from '../backup/restore-decision';
import { isBackupName } from '../backup/layout';
import { ConfigError } from '../config/config';
import { boolean, storeLocation } from '../config/setting-parsers';
import type { StoreLocation } from '../proto/store-location';

/** The restore options' flags (without `--`) and variables. */
export const RESTORE_VARIABLES = {
  'restore-from': 'ETCD_AGENT_RESTORE_FROM',
  'restore-backup': 'ETCD_AGENT_RESTORE_BACKUP',
  'restore-unverified': 'ETCD_AGENT_RESTORE_UNVERIFIED',
  'restore-force': 'ETCD_AGENT_RESTORE_FORCE',
} as const;

/** A restore asked for: the store, its canonical URL (what peers compare), the backup, the restore tool. */
export interface RestoreOptions extends RestoreAsk {
  location: StoreLocation;
  /** Take the newest unverified backup when none is verified (or the one named, unverified). */
  unverified: boolean;
  /** Restore a backup that records no initial member of this pod (backup/origin-decision.ts). */
  force: boolean;
  /** ETCD_AGENT_ETCDUTL: the restore tool; unset, `etcdutl` on PATH, else `etcdctl` (backup/restore-tool.ts). */
  tool?: string;
}

/** The restore asked for, or undefined when none is; throws ConfigError for a bad value. */
export function parseRestoreOptions(
  raw: { from?: string; backup?: string; unverified?: string; force?: string },
  context: { etcdutl?: string; initialMembers: number },
): RestoreOptions | undefined {
  const v = RESTORE_VARIABLES;
  if (raw.from === undefined) {
    if (raw.backup !== undefined) throw new ConfigError(v['restore-backup'], `needs ${v['restore-from']}: the store to restore from`);
    if (raw.unverified !== undefined)
      throw new ConfigError(v['restore-unverified'], `needs ${v['restore-from']}: the store to restore from`);
    if (raw.force !== undefined) throw new ConfigError(v['restore-force'], `needs ${v['restore-from']}: the store to restore from`);
    return undefined;
  }
  const location = storeLocation(raw.from, v['restore-from'], {}) as StoreLocation;
  if (context.initialMembers === 0) {
    throw new ConfigError(
      v['restore-from'],
      'needs ETCD_AGENT_INITIAL_CLUSTER: the initial member whose name sorts first restores, once every other one reports its data gone',
    );
  }
  if (raw.backup !== undefined && !isBackupName(raw.backup)) {
    throw new ConfigError(v['restore-backup'], `"${raw.backup}" is not a backup name (such as 20261204T230000.123Z-1a2b3c)`);
  }
  return {
    location,
    source: canonicalSource(location),
    ...(raw.backup === undefined ? {} : { backup: raw.backup }),
    unverified: raw.unverified === undefined ? false : boolean(raw.unverified, v['restore-unverified'], {}),
    force: raw.force === undefined ? false : boolean(raw.force, v['restore-force'], {}),
    ...(context.etcdutl === undefined ? {} : { tool: context.etcdutl }),
  };
}

/** One spelling of a store location, so that peers given `/dir` and `file:///dir` agree they name the same store. */
export function canonicalSource(location: StoreLocation): string {
  if (location.kind === 'dir') return `file://${location.path}`;
  const query = [
    ...(location.endpoint === undefined ? [] : [`endpoint=${location.endpoint}`]),
    ...(location.region === undefined ? [] : [`region=${location.region}`]),
    `path-style=${String(location.pathStyle)}`,
  ];
  return `s3://${location.bucket}/${location.prefix}?${query.join('&')}`;
}
