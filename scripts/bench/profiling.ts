/**
 * Profiles for missed targets: the same work on a fresh agent run under
 * --cpu-prof, minus a profile of an agent that only started and stopped, per
 * call; and the agent's CPU time per call from /proc/<pid>/stat.
 */
import { AgentOptions, AgentProcess } from './agent-process';
import { describeProfile, diffProfiles, readProfile, summarizeTotals } from './profile';
import { round } from './stats';

/** Runs `work` (resolving how many calls it made) on a profiled agent; describes where one call's CPU went. */
export async function profileCalls(opts: AgentOptions, work: (agent: AgentProcess) => Promise<number>): Promise<string> {
  const idle = await AgentProcess.start({ ...opts, label: `${opts.label}-base`, cpuProfile: true });
  await idle.stop();
  const agent = await AgentProcess.start({ ...opts, cpuProfile: true });
  let calls: number;
  let cpu: number;
  try {
    const before = agent.cpuSeconds();
    calls = await work(agent);
    cpu = agent.cpuSeconds() - before;
  } finally {
    await agent.stop();
  }
  const perCall = summarizeTotals(diffProfiles(readProfile(agent.cpuProfileFile), readProfile(idle.cpuProfileFile), calls));
  return (
    `agent CPU ${round((cpu * 1000) / calls, 2)} ms per call (${calls} calls, /proc/<pid>/stat); ` +
    `CPU profile per call (profile of the calls minus one of a bare start and stop): ${describeProfile(perCall)}`
  );
}
