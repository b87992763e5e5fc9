/**
 * Files re-read when they change, for credentials that are rotated while the
 * agent runs (the agent's own HTTPS pair, the etcd client pair and CA, the
 * token). A file's identity is its device, inode, size and times, taken
 * through symlinks: a rewrite in place changes the size or times, and a
 * Kubernetes Secret volume's atomic `..data` symlink swap changes the inode.
 *
 * Invariant of `FileReloader`: the value in use is only ever replaced by one
 * that loaded completely; files that do not load (half written, a new
 * certificate beside the old key) keep the previous value and are tried again
 * at the next change, with one warning per state seen.
 */
import * as fs from 'node:fs';
import type { Logger } from '../observability/logger';
import { FILE_CHECK_INTERVAL_MS } from './timings';

/** Identity of one file's current contents, following symlinks; throws when it cannot be stat'ed. */
export function fileIdentity(file: string): string {
  const s = fs.statSync(file);
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
}

/** Identity of several files together; a missing file counts as `missing`, so its return is a change too. */
export function filesFingerprint(files: readonly string[]): string {
  return files
    .map((f) => {
      try {
        return fileIdentity(f);
      } catch {
        return 'missing';
      }
    })
    .join('|');
}

/** What a `FileReloader` watches and how it turns the files into a value. */
export interface FileReloaderOptions<T> {
  /** The files whose change triggers a load. */
  files: readonly string[];
  /** Reads and validates the files; throws when they do not load, and then the previous value stays. */
  load: () => T;
  /** True when `next` carries nothing new over `current` (e.g. same bytes): nothing is installed. */
  same?: (current: T, next: T) => boolean;
  /** Puts a newly loaded value in use. */
  install: (value: T) => void;
  /** The value in use at construction, when the caller already loaded it. */
  initial?: T;
  logger?: Logger;
  /** Log messages: when changed files do not load, and when a new value was installed. */
  messages: { rejected: string; installed: string };
  /** Fields logged beside `messages.installed` (never key material). */
  describe?: (value: T) => Record<string, unknown>;
  intervalMs?: number;
}

/** Polls a set of files and installs what they load to, whenever their identity changes. */
export class FileReloader<T> {
  private timer?: NodeJS.Timeout;
  private seen: string;
  private current?: T;
  private lastFailure?: string;

  constructor(private readonly options: FileReloaderOptions<T>) {
    this.seen = filesFingerprint(options.files);
    this.current = options.initial;
  }

  /** Starts polling; the timer never keeps the process alive. */
  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.check(), this.options.intervalMs ?? FILE_CHECK_INTERVAL_MS);
    this.timer.unref();
  }

  /** Stops polling. */
  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Loads now if the files changed; answers whether a new value was installed. */
  check(): boolean {
    // The identity is taken before the read: a write that lands during the read changes it again.
    const seen = filesFingerprint(this.options.files);
    if (seen === this.seen) return false;
    let next: T;
    try {
      next = this.options.load();
    } catch (err) {
      if (this.lastFailure !== seen) {
        this.lastFailure = seen;
        this.options.logger?.warn(this.options.messages.rejected, {
          files: this.options.files,
          error: err instanceof Error ? err.message.split('\n')[0] : String(err),
        });
      }
      return false;
    }
    this.seen = seen;
    this.lastFailure = undefined;
    if (this.current !== undefined && this.options.same?.(this.current, next) === true) return false;
    this.current = next;
    this.options.install(next);
    this.options.logger?.info(this.options.messages.installed, { files: this.options.files, ...this.options.describe?.(next) });
    return true;
  }
}
