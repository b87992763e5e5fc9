/**
 * Profiles for missed targets: the same work on a fresh agent, warmed up,
 * with the V8 CPU profiler running only around the measured calls (started
 * and stopped from inside by the preloaded probe, handle-probe.ts), and the
 * agent's CPU time per call from /proc/<pid>/stat. The profiler samples on a
 * wall-clock tick, so its milliseconds include time the agent waited for a CPU
 * on a busy machine: read its shares, and take CPU per call from /proc.
 */
import { AgentOptions, AgentProcess } from './agent-process';
import { describeProfile, perCallProfile, readProfile, summarizeTotals } from './profile';
import { round } from './stats';

/** Warm-up and measured work against an agent; each resolves how many calls it made. */
export interface ProfiledWork {
  warm: (agent: AgentProcess) => Promise<number>;
  measure: (agent: AgentProcess) => Promise<number>;
}

/** Runs `work` on a profiled agent; describes where one warm call's CPU went. */
export async function profileCalls(opts: AgentOptions, work: ProfiledWork): Promise<string> {
  const agent = await AgentProcess.start({ ...opts, handleProbe: true });
  let calls: number;
  let cpu: number;
  let profile: string;
  try {
    await work.warm(agent);
    await agent.startProfile();
    const before = agent.cpuSeconds();
    calls = await work.measure(agent);
    cpu = agent.cpuSeconds() - before;
    profile = await agent.stopProfile();
  } finally {
    await agent.stop();
  }
  const perCall = summarizeTotals(perCallProfile(readProfile(profile), calls));
  return (
    `agent CPU ${round((cpu * 1000) / calls, 2)} ms per warm call (${calls} calls, /proc/<pid>/stat); ` +
    `CPU profile of those calls only (in-process V8 profiler), per call: ${describeProfile(perCall)}`
  );
}
