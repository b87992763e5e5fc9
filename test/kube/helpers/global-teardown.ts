/**
 * jest globalTeardown of the kube project: `bash scripts/kube.sh down`, which stops the cluster and
 * removes everything it made, then checks that nothing is left (processes, mounts, the network
 * namespace, cgroups, files outside its folder). Anything left fails the run, naming it.
 */
import path from 'node:path';
import { ROOT } from '../../helpers/built-agent';
import { runCommand } from './commands';

export default async function globalTeardown(): Promise<void> {
  const down = await runCommand('bash', [path.join(ROOT, 'scripts/kube.sh'), 'down'], { timeoutMs: 600_000 });
  process.stderr.write(down.stderr);
  if (down.code !== 0)
    throw new Error(
      `bash scripts/kube.sh down exited ${down.code}: the cluster of the Kubernetes stories left something behind:\n${down.stderr}${down.stdout}`,
    );
}
