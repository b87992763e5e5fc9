/**
 * The files through which the sidecar restarts its pod's etcd and prepares it again, without the
 * pod being deleted: they live beside prepare's flags file, in the emptyDir the etcd container's
 * start script (start-script.ts `etcdStartScript`) reads. The script runs etcd as its child
 * and looks for:
 * - `etcd-restart`: stop etcd (SIGTERM) and go round again;
 * - `etcd-hold`: while it exists, do not start etcd; say so in `etcd-state` (`held <nonce>`);
 * - `etcd-move-aside` (only while held): rename the data directory to the sibling it names;
 * - `etcd-flags-once.sh`: flags for the next start only; the script renames it to
 *   `etcd-flags-once.sh.used` before it starts etcd, so it is used at most once whatever crashes,
 *   and says `running <pid> once` for that start.
 *
 * Invariant: a one-shot flags file is only ever written while etcd is held (stopped, and not
 * started until the hold is lifted), so it is consumed by the very next start and never waits
 * beside a running etcd for some later restart.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { writeFileAtomic } from '../etcd-data/data-dir';

/** Pause between two looks for the start script's rename: half its own pause between looks at the hold (0.2 s). */
const MOVE_ASIDE_POLL_MS = 100;

/** The control files of a start directory (the directory of the flags file). */
export function controlFiles(flagsFile: string): {
  dir: string;
  hold: string;
  restart: string;
  state: string;
  moveAside: string;
  once: string;
  onceUsed: string;
} {
  const dir = path.dirname(flagsFile);
  return {
    dir,
    hold: path.join(dir, 'etcd-hold'),
    restart: path.join(dir, 'etcd-restart'),
    state: path.join(dir, 'etcd-state'),
    moveAside: path.join(dir, 'etcd-move-aside'),
    once: path.join(dir, 'etcd-flags-once.sh'),
    onceUsed: path.join(dir, 'etcd-flags-once.sh.used'),
  };
}

/** One flag as a line of a flags file: `set -- "$@" '<flag>'` (what the start script reads, and what a shell sourcing the file runs). */
export function flagLine(flag: string): string {
  return `set -- "$@" '${flag.replace(/'/g, `'\\''`)}'`;
}

/** What the start script last said it does. */
export type StartState = { kind: 'held'; nonce: string } | { kind: 'running'; pid: number; once: boolean } | { kind: 'unknown' };

/** Restarts and holds the pod's etcd through its start script's files. */
export class EtcdStartControl {
  readonly files: ReturnType<typeof controlFiles>;

  constructor(readonly flagsFile: string) {
    this.files = controlFiles(flagsFile);
  }

  /** Asks the script to stop etcd and not start it again until `release`; `nonce` names this hold. */
  hold(nonce: string): void {
    writeFileAtomic(this.files.hold, `${nonce}\n`);
    writeFileAtomic(this.files.restart, `${nonce}\n`);
  }

  /** The nonce of the hold in force, if any (a hold survives the agent: its successor finishes it). */
  heldBy(): string | undefined {
    return readTrimmed(this.files.hold);
  }

  /** True once the script has stopped etcd for the hold `nonce` and waits. */
  isHeld(nonce: string): boolean {
    const state = this.state();
    return state.kind === 'held' && state.nonce === nonce;
  }

  /** What the script says it does. */
  state(): StartState {
    const text = readTrimmed(this.files.state) ?? '';
    const held = /^held (.*)$/.exec(text);
    if (held !== null) return { kind: 'held', nonce: held[1] };
    const running = /^running (\d+)( once)?$/.exec(text);
    if (running !== null) return { kind: 'running', pid: Number(running[1]), once: running[2] !== undefined };
    return { kind: 'unknown' };
  }

  /**
   * Asks the script, while held, to rename `dataDir` to `target` (a `<dataDir>.removed-<stamp>`
   * sibling: the script refuses any other), and waits until it has, or `until`; true when moved. The
   * script removes the request once it has acted on it.
   */
  async moveAside(dataDir: string, target: string, until: number): Promise<boolean> {
    writeFileAtomic(this.files.moveAside, `${target}\n`);
    while (Date.now() < until) {
      if (!fs.existsSync(dataDir) && fs.existsSync(target)) return true;
      if (!fs.existsSync(this.files.moveAside)) return !fs.existsSync(dataDir);
      await new Promise((resolve) => setTimeout(resolve, MOVE_ASIDE_POLL_MS));
    }
    return false;
  }

  /** Writes flags for the next start only (call only while held: see the module's invariant). */
  writeOnce(flags: string[], comment: string): void {
    writeFileAtomic(this.files.once, `# ${comment.replace(/\n/g, ' ')}\n${flags.map(flagLine).join('\n')}\n`);
  }

  /** Drops a one-shot file not yet used (e.g. a recovery called off while held). */
  dropOnce(): void {
    fs.rmSync(this.files.once, { force: true });
  }

  /** Whether a one-shot file waits for the next start, and when one was last used. */
  onceState(): { pending: boolean; usedAt?: Date } {
    const used = statOf(this.files.onceUsed);
    return { pending: fs.existsSync(this.files.once), ...(used === undefined ? {} : { usedAt: used.mtime }) };
  }

  /** Lifts the hold: the script starts etcd within a fraction of a second. */
  release(): void {
    fs.rmSync(this.files.moveAside, { force: true });
    fs.rmSync(this.files.hold, { force: true });
    fs.rmSync(this.files.restart, { force: true });
  }
}

function readTrimmed(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}

function statOf(file: string): fs.Stats | undefined {
  try {
    return fs.statSync(file);
  } catch {
    return undefined;
  }
}
