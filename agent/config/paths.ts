/**
 * Whether a path given in the configuration can serve as what it names: a file to read, a directory
 * prepare reads, writes in and renames, a file it writes. Each check answers why not in a few words
 * (`is a directory, not a file`, `does not exist`, `cannot be read (permission denied)`), or
 * undefined, so that a bad value stops start-up with one line naming its variable (exit 2), never
 * a stack trace later. Looks at the file system; changes nothing.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Why `file` cannot be read as a file, or undefined. */
export function unreadableFile(file: string): string | undefined {
  const stat = statOf(file);
  if (typeof stat === 'string') return stat;
  if (stat.isDirectory()) return 'is a directory, not a file';
  if (!stat.isFile()) return 'is not a regular file';
  return denied(file, fs.constants.R_OK, 'cannot be read (permission denied)');
}

/**
 * Why `dir` cannot serve as a directory to read, write in and rename aside, or undefined. A missing
 * one is fine (it is made when needed) as long as the directory above it exists and can be written.
 * With `readOnly` (the sidecar, which mounts etcd's data read-only and has etcd's start script move
 * it), only reading is asked of it, and nothing of the directory above.
 */
export function unusableDirectory(dir: string, readOnly = false): string | undefined {
  const stat = statOf(dir);
  if (typeof stat !== 'string') {
    if (!stat.isDirectory()) return 'is a file, not a directory';
    const why = readOnly
      ? denied(dir, fs.constants.R_OK | fs.constants.X_OK, 'cannot be read (permission denied)')
      : denied(dir, fs.constants.R_OK | fs.constants.W_OK | fs.constants.X_OK, 'cannot be read and written (permission denied)');
    if (why !== undefined || readOnly) return why;
  } else if (stat !== 'does not exist') {
    return stat;
  }
  const parent = path.dirname(dir);
  const above = statOf(parent);
  if (typeof above === 'string') return `the directory above it, ${parent}, ${above}`;
  if (!above.isDirectory()) return `the path above it, ${parent}, is a file, not a directory`;
  if (readOnly) return undefined;
  return denied(
    parent,
    fs.constants.W_OK | fs.constants.X_OK,
    `cannot be moved aside or made: the directory above it, ${parent}, cannot be written (permission denied)`,
  );
}

/** Why `file` cannot be written (replaced whole, its directory made when missing), or undefined. */
export function unwritableFile(file: string): string | undefined {
  const stat = statOf(file);
  if (typeof stat !== 'string') {
    if (stat.isDirectory()) return 'is a directory, not a file';
    if (!stat.isFile()) return 'is not a regular file';
  } else if (stat !== 'does not exist') {
    return stat;
  }
  // The nearest directory that exists above it must be a directory it may write in.
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    const above = statOf(dir);
    if (above === 'does not exist' && path.dirname(dir) !== dir) continue;
    if (typeof above === 'string') return `the directory ${dir} ${above}`;
    if (!above.isDirectory()) return `cannot be made: ${dir}, on its path, is a file, not a directory`;
    return denied(dir, fs.constants.W_OK | fs.constants.X_OK, `cannot be written: ${dir} cannot be written (permission denied)`);
  }
}

/** The path's stat, or why there is none in a few words. */
function statOf(p: string): fs.Stats | string {
  try {
    return fs.statSync(p);
  } catch (err) {
    switch ((err as NodeJS.ErrnoException).code) {
      case 'ENOENT':
        return 'does not exist';
      case 'ENOTDIR':
        return 'does not exist: a part of its path is a file, not a directory';
      case 'EACCES':
        return 'cannot be reached (permission denied on a directory of its path)';
      case 'ELOOP':
        return 'cannot be reached (a loop of symbolic links)';
      default:
        return `cannot be looked at (${(err as Error).message})`;
    }
  }
}

function denied(p: string, mode: number, why: string): string | undefined {
  try {
    fs.accessSync(p, mode);
    return undefined;
  } catch {
    return why;
  }
}
