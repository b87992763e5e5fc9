/**
 * jest globalSetup of each integration project: the one build of dist/ (see built-agent.ts), made
 * before any worker starts, so the suites that spawn the agent all run the same binary; and the
 * folder of the project's etcd version (scripts/etcd.sh, which builds it when missing), exported as
 * ETCD_DIR_<minor> so no worker runs the script again. A version that cannot be had fails the run,
 * saying which.
 */
import type { Config } from '@jest/types';
import { etcdFolder, etcdMinor } from '../../scripts/etcd-version';
import { buildAgentIfStale } from './built-agent';

export default async function globalSetup(_global: Config.GlobalConfig, project: Config.ProjectConfig): Promise<void> {
  const started = Date.now();
  if ((await buildAgentIfStale()) === 'built') process.stdout.write(`\nbuilt dist/ in ${Date.now() - started} ms\n`);
  const asked = project.testEnvironmentOptions.etcdVersion;
  const minor = etcdMinor({ ETCD_VERSION: typeof asked === 'string' ? asked : process.env.ETCD_VERSION });
  const variable = `ETCD_DIR_${minor.replace('.', '_')}`;
  process.env[variable] ??= etcdFolder(minor);
}
