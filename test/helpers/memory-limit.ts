/**
 * A container's memory limit for a process the test starts: a memory cgroup of its own under the
 * test's, with the limit the kubelet would give the container (no swap beyond it), so the kernel
 * enforces it as it does in a pod: page cache is reclaimed, and memory that cannot be is answered
 * with the OOM killer. A process and its children (the agent and the etcdutl it runs) share it, as
 * they share a container. cgroup v1 (the memory controller's own hierarchy) and v2 are both read;
 * a machine where neither can be written is a failure that says so, never a test quietly run
 * without the limit. Needs root.
 */
import fs from 'node:fs';
import path from 'node:path';

/** A memory cgroup with a limit, and what the kernel recorded in it. */
export class MemoryLimit {
  private constructor(
    private readonly dir: string,
    private readonly v2: boolean,
  ) {}

  /** Makes a cgroup named `name` (unique per test run) under this process's own, limited to `bytes`. */
  static create(name: string, bytes: number): MemoryLimit {
    const lines = fs.readFileSync('/proc/self/cgroup', 'utf8').trim().split('\n');
    const v1 = lines.map((l) => /^\d+:([^:]*):(.*)$/.exec(l)).find((m) => m !== null && m[1].split(',').includes('memory'));
    const v1Root = '/sys/fs/cgroup/memory';
    let dir: string;
    let v2: boolean;
    if (v1 !== undefined && v1 !== null && fs.existsSync(v1Root)) {
      dir = path.join(v1Root, v1[2], name);
      v2 = false;
    } else {
      const unified = lines.find((l) => l.startsWith('0::'));
      if (unified === undefined)
        throw new Error('no memory cgroup: /proc/self/cgroup names neither a v1 memory controller nor a v2 hierarchy');
      dir = path.join('/sys/fs/cgroup', unified.slice(3), name);
      v2 = true;
    }
    try {
      fs.mkdirSync(dir);
    } catch (err) {
      throw new Error(`cannot make the memory cgroup ${dir} (root is needed): ${(err as Error).message}`);
    }
    const limit = new MemoryLimit(dir, v2);
    if (v2) {
      limit.write('memory.max', bytes);
      limit.write('memory.swap.max', 0, true);
    } else {
      limit.write('memory.limit_in_bytes', bytes);
      limit.write('memory.memsw.limit_in_bytes', bytes, true);
    }
    return limit;
  }

  /** The command that runs `command argv…` inside the cgroup (a shell joins it, then execs the command). */
  wrap(command: string, argv: string[]): [string, string[]] {
    const procs = path.join(this.dir, 'cgroup.procs');
    return ['/bin/sh', ['-c', `echo $$ > '${procs}' && exec "$0" "$@"`, command, ...argv]];
  }

  /** How many processes in it the OOM killer has killed. */
  oomKills(): number {
    const file = this.v2 ? 'memory.events' : 'memory.oom_control';
    const kills = /^oom_kill (\d+)$/m.exec(fs.readFileSync(path.join(this.dir, file), 'utf8'));
    if (kills === null) throw new Error(`${path.join(this.dir, file)} has no oom_kill count`);
    return Number(kills[1]);
  }

  /** The highest memory it was charged (page cache included), in bytes. */
  peakBytes(): number {
    return Number(fs.readFileSync(path.join(this.dir, this.v2 ? 'memory.peak' : 'memory.max_usage_in_bytes'), 'utf8').trim());
  }

  /** Removes the cgroup; every process in it must have ended. */
  remove(): void {
    fs.rmdirSync(this.dir);
  }

  private write(file: string, value: number, optional = false): void {
    const at = path.join(this.dir, file);
    if (optional && !fs.existsSync(at)) return; // no swap accounting on this kernel: nothing to limit
    fs.writeFileSync(at, String(value));
  }
}
