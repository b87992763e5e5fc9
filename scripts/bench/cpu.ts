/**
 * Who used the CPU during a measurement: the agent, the bench process (the
 * load generator), the etcd members, and everything else on the machine (other
 * people's test runs on a shared box). Read from /proc, so it costs nothing.
 */
import fs from 'node:fs';

const TICKS = 100; // USER_HZ, as /proc reports it on Linux

/** Cores busy during an interval, by who. */
export interface CpuShare {
  seconds: number;
  agent: number;
  bench: number;
  etcd: number;
  others: number;
  machine: number;
}

function machineBusyTicks(): number {
  const cpu = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal …: busy = all − idle − iowait
  const total = cpu.slice(0, 8).reduce((a, b) => a + b, 0);
  return total - cpu[3] - cpu[4];
}

function processTicks(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

/** Starts accounting; `stop()` gives the cores each party kept busy on average. */
export function cpuAccount(agentPid: number, etcdPids: Array<number | undefined>): { stop: () => CpuShare } {
  const started = performance.now();
  const machine0 = machineBusyTicks();
  const agent0 = processTicks(agentPid);
  const etcd0 = etcdPids.reduce<number>((sum, pid) => sum + processTicks(pid), 0);
  const bench0 = process.cpuUsage();
  return {
    stop: () => {
      const seconds = (performance.now() - started) / 1000;
      const benchUs = process.cpuUsage(bench0);
      const agent = (processTicks(agentPid) - agent0) / TICKS;
      const etcd = (etcdPids.reduce<number>((sum, pid) => sum + processTicks(pid), 0) - etcd0) / TICKS;
      const bench = (benchUs.user + benchUs.system) / 1e6;
      const machine = (machineBusyTicks() - machine0) / TICKS;
      const cores = (x: number): number => Math.round((100 * x) / seconds) / 100;
      return {
        seconds,
        agent: cores(agent),
        bench: cores(bench),
        etcd: cores(etcd),
        others: cores(Math.max(0, machine - agent - bench - etcd)),
        machine: cores(machine),
      };
    },
  };
}

/** "agent 0.9, bench 0.8, etcd 0.1, others 0.2 of 2 cores". */
export function describeCpu(share: CpuShare, cores: number): string {
  return `agent ${share.agent}, load generator ${share.bench}, etcd ${share.etcd}, other processes ${share.others} of ${cores} cores`;
}
