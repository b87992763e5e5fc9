/**
 * Which cases of a version-dependent file (etcd-versions.js) run on every etcd version of the run,
 * and which only on its first (3.6 in scripts/test.sh). A case whose result depends on etcd — its
 * refusals, alarms, data directory, learners, elections — runs on every version. A case that
 * exercises the agent's own logic against calls every version answers alike (SIGKILLing prepare at
 * each of its steps, a second pass of the same rolling defragmentation) runs once: on the other
 * versions it would prove nothing the first did not, and would only lengthen every run.
 * Run alone (`npx jest <file>`, one version) every case runs.
 */
export const firstVersionOfRun = process.env.ETCD_TEST_FIRST_VERSION !== 'false';

/** `describe` on the run's first etcd version; on the others the block is not declared at all. */
export function describeOnFirstVersion(name: string, fn: () => void): void {
  if (firstVersionOfRun) describe(name, fn);
}

/** `it` on the run's first etcd version; on the others the case is not declared at all. */
export function itOnFirstVersion(name: string, fn: () => Promise<void>, timeout?: number): void {
  if (firstVersionOfRun) it(name, fn, timeout);
}
