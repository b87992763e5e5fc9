/**
 * The one way a snapshot becomes a data directory: etcd's own restore, `etcdutl snapshot restore`
 * (3.5 and later) or `etcdctl snapshot restore` (3.4, where etcdutl does not exist), which checks the
 * sha256 etcd appended to the snapshot and writes a member of a new cluster. `ETCD_AGENT_ETCDUTL`
 * names the binary; without it, `etcdutl` on PATH, else `etcdctl`. The data directory it writes must
 * not exist yet: callers restore into a scratch path and rename it into place.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A restore tool found on this machine: its path and the version it reports. */
export interface RestoreTool {
  file: string;
  /** `etcdutl 3.6.16`, `etcdctl 3.4.23`. */
  describe: string;
}

/** What the restored member is: its name, peer URL and the cluster it starts (its own, alone unless given). */
export interface RestoreTarget {
  name: string;
  peerURL: string;
  initialCluster?: string;
  token?: string;
}

/** The first etcdctl minor without `snapshot restore` (etcdutl has it from 3.5); its etcdctl prints help and exits 0. */
const ETCDCTL_WITHOUT_RESTORE = { major: 3, minor: 6 };

/**
 * Finds the tool (`configured` first) and asks it its version; throws when none answers, or when the
 * one found has no snapshot restore (etcdctl 3.6 and later).
 */
export async function findRestoreTool(configured?: string): Promise<RestoreTool> {
  const candidates = configured !== undefined && configured !== '' ? [configured] : ['etcdutl', 'etcdctl'];
  const failures: string[] = [];
  for (const file of candidates) {
    try {
      const { stdout } = await run(file, ['version'], { env: { ...process.env, ETCDCTL_API: '3' }, timeout: 10_000 });
      const version = /(?:etcdutl|etcdctl) version:\s*([0-9.]+)/i.exec(stdout)?.[1];
      if (version === undefined) throw new Error(`"${file} version" printed no version`);
      const kind = path.basename(file).startsWith('etcdctl') ? 'etcdctl' : 'etcdutl';
      const [major, minor] = version.split('.').map(Number);
      if (
        kind === 'etcdctl' &&
        (major > ETCDCTL_WITHOUT_RESTORE.major || (major === ETCDCTL_WITHOUT_RESTORE.major && minor >= ETCDCTL_WITHOUT_RESTORE.minor))
      ) {
        throw new Error(`it is etcdctl ${version}, which has no snapshot restore: name etcdutl in ETCD_AGENT_ETCDUTL`);
      }
      return { file, describe: `${kind} ${version}` };
    } catch (err) {
      failures.push(`${file}: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  throw new Error(`no snapshot restore tool found (set ETCD_AGENT_ETCDUTL): ${failures.join('; ')}`);
}

/** A run of the restore tool that failed, with how it ended (what verify-decision.ts judges it by). */
export class RestoreToolError extends Error {
  constructor(
    message: string,
    readonly ended: {
      /** The system error that kept the tool from starting (ENOENT, EACCES, ENOEXEC). */
      errno?: string;
      exitCode?: number;
      /** The signal that killed it. */
      signal?: string;
      /** Killed by the agent: its timeout (`timedOut`) or its stop (`aborted`). */
      timedOut: boolean;
      aborted: boolean;
      /** Its last lines of output. */
      said: string;
    },
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'RestoreToolError';
  }
}

/** How long one restore may run before the agent kills it. */
const RESTORE_TIMEOUT_MS = 30 * 60_000;

/** How a restore runs: who gets the tool's process once started, and the signal that kills it. */
export interface RestoreRun {
  started?: (child: ChildProcess) => void;
  /** Kills the tool (SIGTERM) when it aborts: an agent that stops leaves no restore running. */
  signal?: AbortSignal;
}

/** Restores `snapshotFile` into `dataDir` (which must not exist) as the member `target`. */
export async function restoreSnapshot(
  tool: RestoreTool,
  snapshotFile: string,
  dataDir: string,
  target: RestoreTarget,
  { started, signal }: RestoreRun = {},
): Promise<void> {
  const args = [
    'snapshot',
    'restore',
    snapshotFile,
    `--data-dir=${dataDir}`,
    `--name=${target.name}`,
    `--initial-cluster=${target.initialCluster ?? `${target.name}=${target.peerURL}`}`,
    `--initial-advertise-peer-urls=${target.peerURL}`,
    `--initial-cluster-token=${target.token ?? 'etcd-cluster'}`,
  ];
  try {
    const running = run(tool.file, args, {
      env: { ...process.env, ETCDCTL_API: '3' },
      timeout: RESTORE_TIMEOUT_MS,
      maxBuffer: 4 * 1024 * 1024,
      ...(signal === undefined ? {} : { signal }),
    });
    started?.(running.child);
    await running;
  } catch (err) {
    const e = err as Error & { stderr?: string; code?: number | string; signal?: string | null; killed?: boolean };
    const said = (e.stderr ?? '').trim().split('\n').slice(-3).join(' ');
    const aborted = signal?.aborted === true;
    // execFile marks a child it killed itself (its timeout, or the signal) `killed`.
    const timedOut = e.killed === true && !aborted;
    const how = timedOut
      ? `killed after ${RESTORE_TIMEOUT_MS / 60_000} minutes`
      : typeof e.signal === 'string'
        ? `killed by ${e.signal}`
        : typeof e.code === 'number'
          ? `exit ${e.code}`
          : '';
    throw new RestoreToolError(
      `${tool.describe} snapshot restore failed${how === '' ? '' : ` (${how})`}: ${said || e.message}`,
      {
        ...(typeof e.code === 'string' ? { errno: e.code } : {}),
        ...(typeof e.code === 'number' ? { exitCode: e.code } : {}),
        ...(typeof e.signal === 'string' ? { signal: e.signal } : {}),
        timedOut,
        aborted,
        said: said || e.message,
      },
      { cause: err },
    );
  }
}
