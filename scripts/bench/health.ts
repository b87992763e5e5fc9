/**
 * GET /v1/health under load: 200 concurrent connections for 10 s (autocannon
 * in the bench process, the agent in its own), beside etcd's own /health (what
 * a kubelet probe asks today). Also: the Status RPCs the agent sends to etcd
 * per second, idle, at a probe's rate and under the load (they must stay flat:
 * one shared observation per max age), resident memory under the load, and the
 * same load at the default log level. The comparisons (etcd, warn, info) run
 * in interleaved short rounds, so a neighbour's burst on this shared machine
 * does not land on one of them only.
 */
import os from 'node:os';
import { AgentOptions, AgentProcess, describeMap, sampleEvery } from './agent-process';
import type { BenchContext, ClusterUnderTest } from './context';
import { pick, sidecarOptions } from './context';
import { cpuAccount, CpuShare, describeCpu } from './cpu';
import { hammer, LoadResult, trickle } from './load';
import { profileCalls } from './profiling';
import { compared } from './report';
import { median, round, sleep } from './stats';

const CONNECTIONS = 200;
const MAX_AGE_MS = 1000;
/** The local-learner check of the sidecar's auto-promotion: one Status of its own etcd a second. */
const AUTO_PROMOTE_STATUS_PER_S = 1;

/** What the health load measured, for the memory rows. */
export interface HealthLoadFigures {
  peakRssMiB: number;
}

/** Measures /v1/health throughput, latency, Status RPC rate and memory under load. */
export async function measureHealth(ctx: BenchContext, cut: ClusterUnderTest, idleRssMiB?: number): Promise<HealthLoadFigures> {
  const seconds = pick(ctx, 10, 3);
  const section = 'health under load';
  const members = cut.endpoints.length;
  const etcdPids = cut.cluster.members.map((m) => m.pid);
  const agentOpts = (label: string, logLevel: string): AgentOptions => sidecarOptions(ctx, cut, label, { logLevel });
  const warn = await AgentProcess.start(agentOpts('health-warn', 'warn'));
  const info = await AgentProcess.start(agentOpts('health-info', 'info'));
  let main: LoadResult;
  let cpu: CpuShare;
  let peakRss: number;
  let rates: { idle: number; probe: number; load: number };
  const rounds: Record<'etcd' | 'warn' | 'info', LoadResult[]> = { etcd: [], warn: [], info: [] };
  try {
    const targets = { etcd: `${cut.endpoints[0]}/health`, warn: `${warn.url}/v1/health`, info: `${info.url}/v1/health` };
    for (const url of Object.values(targets)) await hammer(url, CONNECTIONS, 1); // warm-up: JIT, connections
    await sleep(1500);

    const rate = async (during: () => Promise<unknown>): Promise<number> => {
      const before = await warn.counter('etcd_agent_status_rpcs_total');
      const started = performance.now();
      await during();
      const after = await warn.counter('etcd_agent_status_rpcs_total');
      return (after - before) / ((performance.now() - started) / 1000);
    };
    const idle = await rate(() => sleep(pick(ctx, 5000, 2000)));
    const probe = await rate(() => trickle(warn.url, '/v1/health', 20, pick(ctx, 5, 2)));

    // The figure the targets are about: 200 connections for 10 s at log level warn.
    const rss = sampleEvery(200, () => warn.rssMiB());
    const account = cpuAccount(warn.pid, etcdPids);
    let loaded!: LoadResult;
    const underLoad = await rate(async () => (loaded = await hammer(targets.warn, CONNECTIONS, seconds)));
    cpu = account.stop();
    peakRss = Math.max(...rss.stop());
    main = loaded;
    rates = { idle, probe, load: underLoad };

    // Interleaved comparisons.
    const cmpSeconds = pick(ctx, 3, 2);
    for (let r = 0; r < pick(ctx, 3, 1); r++) {
      for (const k of ['etcd', 'warn', 'info'] as const) rounds[k].push(await hammer(targets[k], CONNECTIONS, cmpSeconds));
    }
  } finally {
    await warn.stop();
    await info.stop();
  }
  const cores = os.cpus().length;
  const cpuPerRequestUs = (cpu.agent * cpu.seconds * 1e6) / main.total;
  ctx.log(
    `health: ${Math.round(main.requestsPerSecond)} req/s p50 ${main.p50Ms} ms p99 ${main.p99Ms} ms, status RPC/s ${round(rates.load)}, ` +
      `${round(cpuPerRequestUs, 0)} µs CPU/request; CPU: ${describeCpu(cpu, cores)}`,
  );
  if (main.non2xx > 0 || main.errors > 0) {
    ctx.notes.push(
      `health: under load the agent answered ${main.non2xx} non-2xx and ${main.errors} connection errors out of ${main.total}.`,
    );
  }
  const med = (k: keyof typeof rounds, f: (r: LoadResult) => number): number => median(rounds[k].map(f));
  const rps = (r: LoadResult): number => r.requestsPerSecond;
  const p50 = (r: LoadResult): number => r.p50Ms;
  const p99 = (r: LoadResult): number => r.p99Ms;
  const n = rounds.etcd.length;

  const expected = (members * 1000) / MAX_AGE_MS + AUTO_PROMOTE_STATUS_PER_S;
  ctx.rows.push(
    {
      section,
      figure: `/v1/health req/s, ${CONNECTIONS} conns × ${seconds} s, log level warn`,
      value: main.requestsPerSecond,
      unit: 'req/s',
      detail: { load: main, cpuCores: cpu, agentCpuPerRequestUs: round(cpuPerRequestUs, 1) },
    },
    {
      section,
      figure: '/v1/health p50 latency, same run',
      value: main.p50Ms,
      unit: 'ms',
    },
    {
      section,
      figure: '/v1/health p99 latency, same run',
      value: main.p99Ms,
      unit: 'ms',
    },
    {
      section,
      figure: `interleaved rounds (${n} × [etcd, warn, info] × ${rounds.etcd[0]?.seconds ?? 0} s): req/s`,
      value: med('warn', rps),
      unit: 'req/s',
      baseline: { name: "etcd's own /health, same load", value: med('etcd', rps), unit: 'req/s' },
      ratio: { value: med('warn', rps) / med('etcd', rps), of: 'agent ÷ etcd' },
      target: '≥ 1× etcd',
      pass: med('warn', rps) >= med('etcd', rps),
      detail: rounds,
    },
    compared(
      section,
      'interleaved rounds: p50 latency',
      med('warn', p50),
      'ms',
      { name: "etcd's own /health p50", value: med('etcd', p50) },
      'agent ÷ etcd',
    ),
    compared(
      section,
      'interleaved rounds: p99 latency',
      med('warn', p99),
      'ms',
      { name: "etcd's own /health p99", value: med('etcd', p99) },
      'agent ÷ etcd',
      {
        target: '≤ 1× etcd',
        pass: med('warn', p99) <= med('etcd', p99),
      },
    ),
    compared(
      section,
      'interleaved rounds: req/s at the default log level (info)',
      med('info', rps),
      'req/s',
      { name: 'same rounds at warn', value: med('warn', rps) },
      'info ÷ warn',
    ),
    {
      section,
      figure: `Status RPCs/s to etcd under the load (${Math.round(main.requestsPerSecond)} req/s)`,
      value: rates.load,
      unit: '/s',
      baseline: { name: 'members × 1000/max-age + 1 auto-promote check', value: expected, unit: '/s' },
      ratio: { value: rates.load / expected, of: 'measured ÷ expected' },
      target: 'flat, ≈ expected',
      pass: rates.load <= expected * 1.5 && rates.load <= Math.max(rates.probe, expected) * 1.5,
      detail: rates,
    },
    // The ratio here is the load's rate over this one, not this one over its baseline.
    {
      ...compared(
        section,
        'Status RPCs/s at a probe rate (20 req/s, one at a time)',
        rates.probe,
        '/s',
        { name: 'idle (only /metrics scrapes)', value: rates.idle },
        '',
      ),
      ratio: { value: rates.load / rates.probe, of: 'under load ÷ at 20 req/s' },
    },
  );

  const rpsRatio = med('warn', rps) / med('etcd', rps);
  const p99Ratio = med('warn', p99) / med('etcd', p99);
  if (rpsRatio < 1 || p99Ratio > 1) {
    const profile = await profileCalls(agentOpts('health-profile', 'warn'), {
      warm: async (agent) => (await hammer(`${agent.url}/v1/health`, CONNECTIONS, 1)).total,
      measure: async (agent) => (await hammer(`${agent.url}/v1/health`, CONNECTIONS, seconds)).total,
    });
    ctx.notes.push(
      `health load missed on node ${ctx.nodeVersion} (interleaved rounds: ${round(rpsRatio)}× etcd's req/s vs ≥ 1, p99 ${round(p99Ratio)}× etcd's vs ≤ 1; ` +
        `the 10 s run: ${Math.round(main.requestsPerSecond)} req/s, p99 ${main.p99Ms} ms). CPU during the run: ${describeCpu(cpu, cores)}. The agent spent ${round(cpuPerRequestUs, 0)} µs of CPU ` +
        `per request (/proc/<pid>/stat), so even a whole core to itself bounds one Node process at ~${Math.round(1e6 / cpuPerRequestUs)} req/s; ` +
        `the p99 is the queue of ${CONNECTIONS} connections behind that one thread. Under the same load, ${profile}`,
    );
  }
  if (idleRssMiB !== undefined && peakRss > 1.5 * idleRssMiB) {
    ctx.notes.push(await explainLoadMemory(agentOpts('health-memory', 'warn'), seconds, peakRss, 1.5 * idleRssMiB));
  }
  return { peakRssMiB: peakRss };
}

const SEMI_SPACE_MIB = 2;

/** The load on an agent whose V8 young generation is capped: how much of the peak is young-generation growth. */
async function semiSpaceExperiment(opts: AgentOptions, seconds: number): Promise<{ peakRss: number; load: LoadResult }> {
  const agent = await AgentProcess.start({
    ...opts,
    label: `${opts.label}-semispace`,
    nodeArgs: [`--max-semi-space-size=${SEMI_SPACE_MIB}`],
  });
  try {
    await hammer(`${agent.url}/v1/health`, CONNECTIONS, 1);
    const rss = sampleEvery(200, () => agent.rssMiB());
    const load = await hammer(`${agent.url}/v1/health`, CONNECTIONS, seconds);
    return { peakRss: Math.max(...rss.stop()), load };
  } finally {
    await agent.stop();
  }
}

/** Where the agent's memory sits under the load: mappings (/proc/<pid>/smaps) and V8's heap, before and after a full GC. */
async function explainLoadMemory(opts: AgentOptions, seconds: number, peakRss: number, targetMiB: number): Promise<string> {
  const agent = await AgentProcess.start({ ...opts, handleProbe: true });
  let rssBefore: number;
  let before: Record<string, number>;
  let after: Record<string, number>;
  let inside: Awaited<ReturnType<AgentProcess['handles']>>;
  try {
    await hammer(`${agent.url}/v1/health`, CONNECTIONS, 1);
    const load = hammer(`${agent.url}/v1/health`, CONNECTIONS, seconds);
    await sleep((seconds * 1000 * 2) / 3);
    rssBefore = agent.rssMiB();
    before = agent.memoryMap();
    inside = await agent.handles(); // a full GC first
    after = agent.memoryMap();
    await load;
  } finally {
    await agent.stop();
  }
  const capped = await semiSpaceExperiment(opts, seconds);
  const mib = (b: number): number => round(b / 2 ** 20, 1);
  const space = (name: string): string => {
    const s = inside.heapSpaces[name];
    return s === undefined ? '?' : `${mib(s.used)} used/${mib(s.committed)} committed`;
  };
  return (
    `memory under load missed by ${round(peakRss - targetMiB, 1)} MiB (peak ${round(peakRss, 1)} MiB vs ≤ 1.5× idle = ${round(targetMiB, 1)} MiB). Memory profile of an agent two thirds into the same load ` +
    `(/proc/<pid>/smaps and V8 heap statistics from inside): RSS ${round(rssBefore, 1)} MiB = ${describeMap(before)}. ` +
    `A forced full GC brought anonymous memory to ${after.anon ?? 0} MiB: V8's heap holds ${mib(inside.memory.heapTotal)} MiB committed ` +
    `(young generation ${space('new_space')} MiB — grown to its 2 × 16 MiB semi-space limit by the allocation rate —, old generation ${space('old_space')} MiB), ` +
    `so ~${round((before.anon ?? 0) - (after.anon ?? 0), 0)} MiB was garbage awaiting collection; the live heap is ${mib(inside.memory.heapUsed)} MiB. ` +
    `Experiment: the same load on an agent started with node --max-semi-space-size=${SEMI_SPACE_MIB} peaked at ${round(capped.peakRss, 1)} MiB RSS ` +
    `and served ${Math.round(capped.load.requestsPerSecond)} req/s.`
  );
}
