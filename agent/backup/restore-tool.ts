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

/** Finds the tool (`configured` first) and asks it its version; throws when none answers. */
export async function findRestoreTool(configured?: string): Promise<RestoreTool> {
  const candidates = configured !== undefined && configured !== '' ? [configured] : ['etcdutl', 'etcdctl'];
  const failures: string[] = [];
  for (const file of candidates) {
    try {
      const { stdout } = await run(file, ['version'], { env: { ...process.env, ETCDCTL_API: '3' }, timeout: 10_000 });
      const version = /(?:etcdutl|etcdctl) version:\s*([0-9.]+)/i.exec(stdout)?.[1];
      if (version === undefined) throw new Error(`"${file} version" printed no version`);
      return { file, describe: `${path.basename(file).startsWith('etcdctl') ? 'etcdctl' : 'etcdutl'} ${version}` };
    } catch (err) {
      failures.push(`${file}: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  throw new Error(`no snapshot restore tool found (set ETCD_AGENT_ETCDUTL): ${failures.join('; ')}`);
}

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
      timeout: 30 * 60_000,
      maxBuffer: 4 * 1024 * 1024,
      ...(signal === undefined ? {} : { signal }),
    });
    started?.(running.child);
    await running;
  } catch (err) {
    const e = err as Error & { stderr?: string };
    const said = (e.stderr ?? '').trim().split('\n').slice(-3).join(' ');
    throw new Error(`${tool.describe} snapshot restore failed: ${said || e.message}`, { cause: err });
  }
}
