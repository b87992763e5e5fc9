/**
 * Start-up: from spawning the bin (`etcd-lifecycle-agent serve`) to its first
 * `/readyz` 200, and resident memory once idle — beside the floor, a bare Node
 * HTTP server answering the same route, started and measured the same way.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { freePort } from '../ports';
import { AgentOptions, AgentProcess, describeMap, memoryMapOf, procRssMiB, track, withParentDeathSignal } from './agent-process';
import type { BenchContext, ClusterUnderTest } from './context';
import { pick, sidecarOptions } from './context';
import { probeOnce } from './http';
import { describeProfile, summarizeProfile } from './profile';
import { median, round, sleep, summarize } from './stats';

const BARE_SERVER = `require('node:http').createServer((q, s) => { s.setHeader('content-type', 'application/json'); s.end('{"status":"ok"}'); }).listen(Number(process.env.PORT), '127.0.0.1');`;

/** The targets: start-up within 2× a bare Node server, idle memory within its RSS + 20 MiB. */
export const STARTUP_RATIO = 2;
export const IDLE_MARGIN_MIB = 20;

/** Start-up figures the memory rows need. */
export interface StartupFigures {
  idleRssMiB: number;
  bareRssMiB: number;
}

/** Measures start-up time and idle memory of the agent against a bare Node server. */
export async function measureStartup(ctx: BenchContext, cut: Pick<ClusterUnderTest, 'cluster' | 'endpoints'>): Promise<StartupFigures> {
  const runs = pick(ctx, 8, 3);
  const rssRuns = pick(ctx, 3, 1);
  const agentMs: number[] = [];
  const bareMs: number[] = [];
  const agentRss: number[] = [];
  const bareRss: number[] = [];
  let bareMap: Record<string, number> = {};
  const opts = (label: string, cpuProfile = false) => sidecarOptions(ctx, cut, label, { cpuProfile });
  for (let i = 0; i < runs; i++) {
    const agent = await AgentProcess.start(opts(`startup-${i}`));
    agentMs.push(agent.startupMs);
    if (i < rssRuns) {
      // Idle, but after one real call: its etcd connections are part of what it holds.
      await agent.http.get('/v1/health');
      await sleep(2000);
      agentRss.push(agent.rssMiB());
    }
    await agent.stop();
    const bare = await startBare(ctx.node);
    bareMs.push(bare.ms);
    if (i < rssRuns) {
      await sleep(2000);
      bareRss.push(procRssMiB(bare.child.pid ?? 0));
      bareMap = memoryMapOf(bare.child.pid ?? 0);
    }
    bare.child.kill('SIGKILL');
  }
  ctx.log(`startup: agent ${round(median(agentMs))} ms, bare node ${round(median(bareMs))} ms, idle RSS ${round(median(agentRss))} MiB`);

  const startup = median(agentMs);
  ctx.rows.push({
    section: 'start-up and memory',
    figure: `process start → /readyz 200, p50 (n=${runs})`,
    value: startup,
    unit: 'ms',
    baseline: { name: 'bare Node HTTP server, same way', value: median(bareMs), unit: 'ms' },
    ratio: { value: startup / median(bareMs), of: 'agent ÷ bare' },
    target: '≤ 2× bare',
    pass: startup / median(bareMs) <= STARTUP_RATIO,
    detail: { agent: summarize(agentMs), bare: summarize(bareMs) },
  });
  if (startup / median(bareMs) > STARTUP_RATIO) {
    const agent = await AgentProcess.start(opts('startup-profile', true));
    await agent.stop();
    const summary = summarizeProfile(agent.cpuProfileFile, 10);
    ctx.notes.push(
      `start-up missed on node ${ctx.nodeVersion}: ${round(startup / median(bareMs))}× a bare Node server vs ≤ ${STARTUP_RATIO}× (${Math.round(startup)} ms vs ${Math.round(median(bareMs))} ms). ` +
        `CPU profile of one start (start → /readyz → SIGTERM): ${describeProfile(summary, 8)}`,
    );
  }
  const idleRssMiB = median(agentRss);
  if (idleRssMiB > median(bareRss) + IDLE_MARGIN_MIB)
    ctx.notes.push(await explainIdleMemory(opts('memory-probe'), idleRssMiB, median(bareRss), bareMap));
  return { idleRssMiB, bareRssMiB: median(bareRss) };
}

/** Where an idle agent's resident memory sits: mappings (/proc/<pid>/smaps) and V8's heap after a full GC. */
async function explainIdleMemory(
  opts: AgentOptions,
  idleRssMiB: number,
  bareRssMiB: number,
  bareMap: Record<string, number>,
): Promise<string> {
  const agent = await AgentProcess.start({ ...opts, handleProbe: true });
  try {
    await agent.http.get('/v1/health');
    await sleep(2000);
    const rss = agent.rssMiB();
    const map = agent.memoryMap();
    const inside = await agent.handles(); // runs a full GC first
    const mib = (b: number): number => round(b / 2 ** 20, 1);
    const spaces = Object.entries(inside.heapSpaces)
      .filter(([, space]) => space.committed > 512 * 1024)
      .sort((a, b) => b[1].committed - a[1].committed)
      .map(([name, space]) => `${name} ${mib(space.used)} used/${mib(space.committed)} committed`)
      .join(', ');
    return (
      `idle memory missed by ${round(idleRssMiB - bareRssMiB - IDLE_MARGIN_MIB, 1)} MiB (${round(idleRssMiB, 1)} MiB vs ≤ bare + ${IDLE_MARGIN_MIB} MiB; a bare Node HTTP server holds ${round(bareRssMiB, 1)} MiB = ${describeMap(bareMap)}). ` +
      `Memory profile of an idle agent (/proc/<pid>/smaps, and V8 heap statistics from inside after a forced full GC): RSS ${round(rss, 1)} MiB = ${describeMap(map)}; ` +
      `V8 heap used ${mib(inside.memory.heapUsed)} MiB of ${mib(inside.memory.heapTotal)} MiB committed (MiB: ${spaces}) — the code and data of the modules it loads ` +
      `(etcd3 with gRPC and protobufjs, winston, prom-client, zod; probes and health never load express); external ${mib(inside.memory.external)} MiB.`
    );
  } finally {
    await agent.stop();
  }
}

async function startBare(node: string): Promise<{ child: ChildProcess; ms: number }> {
  const port = await freePort();
  const [cmd, argv] = withParentDeathSignal([node, '-e', BARE_SERVER]);
  const started = performance.now();
  const child = spawn(cmd, argv, { env: { ...process.env, PORT: String(port) }, stdio: 'ignore' });
  track(child);
  for (;;) {
    if ((await probeOnce(`http://127.0.0.1:${port}/readyz`, 500)) === 200) return { child, ms: performance.now() - started };
    if (performance.now() - started > 20_000) throw new Error('bare node server did not start');
    await sleep(2);
  }
}
