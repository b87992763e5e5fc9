/**
 * jest globalSetup of the integration project: the one build of dist/ (see built-agent.ts), made
 * before any worker starts, so the suites that spawn the agent all run the same binary.
 */
import { buildAgentIfStale } from './built-agent';

export default async function globalSetup(): Promise<void> {
  const started = Date.now();
  if ((await buildAgentIfStale()) === 'built') process.stdout.write(`\nbuilt dist/ in ${Date.now() - started} ms\n`);
}
