/** kube-inject's command run without a process: what it prints is captured, its files come from a map. */
import type { KubeInjectIo } from '../../agent/cli/kube-inject-command';

/** An io for `runKubeInject` that captures stdout and stderr and reads files from `files` (`-` is stdin). */
export function kubeInjectHarness(files: Record<string, string>): KubeInjectIo & { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    stdout: (s) => out.push(s),
    stderr: (s) => err.push(s),
    readFile: async (file) => {
      const text = files[file];
      if (text === undefined) throw new Error(`ENOENT: no such file or directory, open '${file}'`);
      return text;
    },
  };
}
