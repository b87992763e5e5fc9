/**
 * Whether etcd's user, which prepare runs as, may use every file of a data directory as etcd must:
 * read and write each file, and read, write and enter each directory (etcd writes new WAL segments
 * and snapshots beside old ones, renames and removes them, and opens its database read-write).
 *
 * A data directory that an etcd of another user wrote (root, in etcd's own images) is taken over by
 * the pod's `fsGroup`: on a volume whose top does not have that group yet, the kubelet gives every
 * file of it the group, read and write for the group, and the set-group-id bit to every directory,
 * so that what etcd writes later gets the group too; etcd's user, a member of the group, then uses
 * the old files through it. etcd asks for mode 0700 on its directories but only warns about a
 * directory that has another (`check file permission`, every version from 3.4), so nothing needs to
 * be changed back. When the kubelet has not done it (a volume type without ownership management, a
 * pod without `fsGroup`, or `fsGroupChangePolicy: OnRootMismatch` on a volume whose top already had
 * the group), etcd would fail on the first file it cannot open; prepare names that file first.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** What to do about a data directory this user cannot use, said once for every such case. */
export const TAKEOVER_HINT =
  "files another user's etcd wrote (root, before) are taken over with the pod's securityContext.fsGroup, " +
  'which the kubelet gives them with group read-write (under fsGroupChangePolicy: OnRootMismatch only while the top ' +
  'of the volume lacks that group: set Always once to redo it), or chown them to this user (docs/deploy/statefulset.md)';

/** The most entries looked at: etcd keeps a few dozen files; a directory holding more is not etcd's alone. */
const MAX_ENTRIES = 100_000;

/**
 * The first entry below `dataDir` (itself included) that this process cannot use as etcd must, as
 * one line naming it, its owner and mode, and TAKEOVER_HINT; undefined when every one can be used,
 * or when `dataDir` does not exist. Symbolic links are not followed. Root may use everything.
 */
export function unusableEntry(dataDir: string): string | undefined {
  const uid = process.getuid?.();
  const gid = process.getgid?.();
  if (uid === undefined || uid === 0) return undefined;
  const pending = [dataDir];
  for (let seen = 0; pending.length > 0 && seen < MAX_ENTRIES; seen++) {
    const entry = pending.pop() as string;
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(entry);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      return `${entry} cannot be looked at (${(err as Error).message}); ${TAKEOVER_HINT}`;
    }
    if (stat.isSymbolicLink()) continue;
    const dir = stat.isDirectory();
    const want = fs.constants.R_OK | fs.constants.W_OK | (dir ? fs.constants.X_OK : 0);
    try {
      fs.accessSync(entry, want);
    } catch {
      const mode = (stat.mode & 0o7777).toString(8).padStart(4, '0');
      return (
        `${entry} cannot be ${dir ? 'read, written and entered' : 'read and written'} by uid ${uid} gid ${gid} ` +
        `(it is uid ${stat.uid} gid ${stat.gid} mode ${mode}): ${TAKEOVER_HINT}`
      );
    }
    if (dir) for (const name of fs.readdirSync(entry)) pending.push(path.join(entry, name));
  }
  return undefined;
}
