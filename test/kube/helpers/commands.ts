/**
 * The commands the stories run as a user would: kubectl against the one-node cluster, the agent's
 * own CLI (kube-inject), scripts/kube.sh, and containerd's ctr. Each runs as a child process without
 * blocking this one, so the writer and the pollers of a story keep their pace while it runs.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { MAIN_JS, ROOT } from '../../helpers/built-agent';

/** What a command did. */
export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `file args…` (stdin from `input`), and resolves when it exits; killed after `timeoutMs`. */
export function runCommand(
  file: string,
  args: string[],
  opts: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {},
): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { cwd: opts.cwd ?? ROOT, env: opts.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`${file} could not be run: ${err.message}`));
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.input);
  });
}

/** The command line of a run, for a failure message. */
function shown(file: string, args: string[]): string {
  return [file, ...args].map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}

/** Runs a command and answers its stdout; rejects with its exit code and output when it fails. */
export async function mustRun(file: string, args: string[], opts: Parameters<typeof runCommand>[2] = {}): Promise<string> {
  const ran = await runCommand(file, args, opts);
  if (ran.code !== 0) throw new Error(`${shown(file, args)} exited ${ran.code}:\n${ran.stderr}${ran.stdout}`);
  return ran.stdout;
}

/** The kubeconfig of the cluster, which jest's global setup put in KUBECONFIG. */
export function kubeconfig(): string {
  const file = process.env.KUBECONFIG;
  if (file === undefined || file === '')
    throw new Error('KUBECONFIG is not set: the kube project’s global setup (test/kube/helpers/global-setup.ts) sets it');
  return file;
}

/** `kubectl args…` against the cluster, as a user runs it. */
export function kubectl(args: string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<Ran> {
  return runCommand('kubectl', ['--kubeconfig', kubeconfig(), ...args], opts);
}

/** `kubectl args…`, its stdout; rejects when it fails. */
export function mustKubectl(args: string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<string> {
  return mustRun('kubectl', ['--kubeconfig', kubeconfig(), ...args], opts);
}

/** `bash scripts/kube.sh args…`, its stdout; rejects when it fails. */
export function kubeSh(args: string[], timeoutMs = 600_000): Promise<string> {
  return mustRun('bash', [path.join(ROOT, 'scripts/kube.sh'), ...args], { timeoutMs });
}

/** `etcd-lifecycle-agent args…` from dist/ (built by the global setup), its stdout; rejects when it fails. */
export function agentCli(args: string[], input?: string): Promise<string> {
  return mustRun(process.execPath, [MAIN_JS, ...args], { input });
}

/**
 * `ctr -n k8s.io args…` on the cluster's containerd: its socket is in the folder of the kubeconfig
 * (KUBE_DIR, see scripts/kube.sh).
 */
export function ctr(args: string[]): Promise<string> {
  const socket = path.join(path.dirname(kubeconfig()), 'containerd', 'containerd.sock');
  return mustRun('ctr', ['--address', socket, '-n', 'k8s.io', ...args]);
}
