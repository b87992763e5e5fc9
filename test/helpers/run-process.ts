/**
 * Runs the built command line (dist/bin/etcd-lifecycle-agent.js, the bundle the
 * image runs, with the Node flags of its first line) or a shell script as a child
 * process and collects its exit code and output, for the CLI and script tests. The
 * binary is the one build of dist/ that jest's globalSetup keeps fresh (built-agent.ts).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { binCommand } from '../../scripts/bin-command';
import { MAIN_JS } from './built-agent';

export { MAIN_JS, ROOT } from './built-agent';

/** What a process did. */
export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The environment of a child: this one without the ETCD_AGENT_* variables (nor POD_IP and
 * HOST_IP, which would make the agent of a CI job in a host-network pod want a token), plus `env`.
 */
export function childEnv(env: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const inherited = ([k]: [string, unknown]): boolean =>
    !k.startsWith('ETCD_AGENT_') && !k.startsWith('KB_') && k !== 'POD_IP' && k !== 'HOST_IP';
  const base = Object.fromEntries(Object.entries(process.env).filter(inherited));
  return { ...base, ...env };
}

/** Runs `file` with `args` (as user `as.uid` when given); resolves when it exits (killed after `timeoutMs`). */
export function run(
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs = 60_000,
  as: { uid?: number; gid?: number } = {},
): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'], ...as });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * Runs `etcd-lifecycle-agent args…` from dist with `env` (ETCD_AGENT_* of this process removed); as
 * the user `as.uid` when given (a test running as root reads every file, another user does not).
 */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}, as: { uid?: number; gid?: number } = {}): Promise<Ran> {
  const [node, argv] = binCommand(MAIN_JS, args);
  return run(node, argv, childEnv(env), 60_000, as);
}

/**
 * A directory holding an `etcd-lifecycle-agent` launcher for the bin, as `npm install -g` or the
 * image's symlink would put on PATH (with this process's node and the bin's own flags). The caller removes it.
 */
export function cliOnPath(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcd-agent-bin-'));
  const launcher = path.join(dir, 'etcd-lifecycle-agent');
  const [node, argv] = binCommand(MAIN_JS);
  fs.writeFileSync(launcher, `#!/bin/sh\nexec ${[node, ...argv].map((a) => `"${a}"`).join(' ')} "$@"\n`, { mode: 0o755 });
  return dir;
}
