/**
 * `npm run bench`: starts a real local etcd cluster, runs every measurement
 * against its baseline on that same cluster, and prints one table (also
 * written to bench-results.json). Ratios within one run and medians, never a
 * single absolute time: these machines are noisy.
 *
 *   BENCH_QUICK=1        short version for development (fewer rounds, shorter loads)
 *   BENCH_ONLY=a,b       only these sections: startup, join, scale, health, detection, promptness, soak, defrag, backup
 *   BENCH_KEEP=1         keep the scratch directory (agent logs, CPU profiles)
 *   BENCH_OUT=file       where the JSON goes (default ./bench-results.json)
 *   BENCH_NODES=a,b      node binaries to run the agent on (default: this node, then Node 24 from
 *                        scripts/node24.sh); start-up, join and health run on each, beside a bare
 *                        server on the same node; scale, detection and soak on the first only
 *   ETCD_VERSION=3.6     the etcd the clusters run (3.4, 3.5, 3.6 or 3.7; scripts/etcd-version.ts):
 *                        every section of the table names it
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { etcdInstall } from '../etcd-version';
import { LocalEtcdCluster } from '../local-cluster';
import { AgentProcess, MAIN_JS } from './agent-process';
import type { BenchContext, ClusterUnderTest } from './context';
import { measureBackup } from './backup';
import { measureDefrag } from './defrag';
import { measureDetection } from './detection';
import { measureHealth } from './health';
import { measureIdempotentJoin } from './join-idempotent';
import { measurePromptness } from './promptness';
import { compared, machine, renderReport, Results, writeJson } from './report';
import { measureScale } from './scale';
import { measureSoak } from './soak';
import { IDLE_MARGIN_MIB, measureStartup } from './startup';

/** The target: peak resident memory under the health load within 1.5× the idle agent's. */
const PEAK_RATIO = 1.5;
import { round } from './stats';

const SECTIONS = ['startup', 'join', 'scale', 'health', 'detection', 'promptness', 'soak', 'defrag', 'backup'] as const;
type Section = (typeof SECTIONS)[number];

async function main(): Promise<void> {
  const began = performance.now();
  const quick = /^(1|true|yes)$/i.test(process.env.BENCH_QUICK ?? '');
  const only = new Set((process.env.BENCH_ONLY ?? SECTIONS.join(',')).split(',').map((s) => s.trim()));
  const unknown = [...only].filter((s) => !SECTIONS.includes(s as Section));
  if (unknown.length > 0) throw new Error(`BENCH_ONLY: unknown section ${unknown.join(', ')} (known: ${SECTIONS.join(', ')})`);
  const wanted = (s: Section): boolean => only.has(s);
  if (!fs.existsSync(MAIN_JS)) throw new Error(`${MAIN_JS} is missing: run npm run build`);

  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcd-agent-bench-'));
  // ETCD_VERSION picks it (built by scripts/etcd.sh when missing); the clusters below run the same.
  const etcdVersion = etcdInstall().version;
  const results: Results = {
    date: new Date().toISOString(),
    machine: machine(etcdVersion),
    quick,
    settings: {
      agentLogLevel: 'warn (health load repeated at info)',
      healthMaxAgeMs: 1000,
      statusTimeoutMs: 500,
      etcd: `${etcdVersion}, local cluster on 127.0.0.1, --heartbeat-interval=50 --election-timeout=500`,
    },
    rows: [],
    notes: [],
  };
  const nodes = nodeBinaries();
  results.settings.nodes = nodes.map((n) => n.version).join(', ');
  const base = {
    quick,
    workDir,
    rows: results.rows,
    notes: results.notes,
    log: (message: string) => process.stderr.write(`[bench ${round((performance.now() - began) / 1000, 1)}s] ${message}\n`),
  };
  base.log(`scratch directory ${workDir}${quick ? ' (BENCH_QUICK)' : ''}; agents on ${results.settings.nodes}`);

  try {
    if (['startup', 'join', 'scale', 'health', 'detection'].some((s) => wanted(s as Section))) {
      const cluster = await LocalEtcdCluster.start({ size: 3 });
      try {
        const endpoints = cluster.clientURLs();
        base.log(`3-member cluster up: ${endpoints.join(', ')}`);
        for (const [i, node] of nodes.entries()) {
          const ctx: BenchContext = { ...base, node: node.path, nodeVersion: node.version };
          const first = results.rows.length;
          let idleRss: { idleRssMiB: number; bareRssMiB: number } | undefined;
          let loadRss: { peakRssMiB: number } | undefined;
          if (wanted('startup')) idleRss = await measureStartup(ctx, { cluster, endpoints });
          const agent = await AgentProcess.start({
            endpoints,
            localEndpoint: endpoints[0],
            memberName: cluster.members[0].name,
            workDir,
            label: `sidecar-etcd-0-${node.version}`,
            node: node.path,
          });
          try {
            const cut: ClusterUnderTest = { cluster, agent, endpoints };
            if (wanted('join')) await measureIdempotentJoin(ctx, cut);
            if (i === 0 && wanted('scale')) await measureScale(ctx, cut);
            if (wanted('health')) loadRss = await measureHealth(ctx, cut, idleRss?.idleRssMiB);
            if (i === 0 && wanted('detection')) await measureDetection(ctx, cut);
          } finally {
            await agent.stop();
          }
          memoryRows(results, idleRss, loadRss);
          // Each figure says which node and which etcd it was measured on.
          for (const row of results.rows.slice(first)) row.section = `${row.section} · node ${node.version} · etcd ${etcdVersion}`;
        }
      } finally {
        await cluster.destroy();
      }
    }
    if (wanted('promptness')) {
      // A cluster of its own: a leader's leave removes members and adds them back on new ports.
      const first = results.rows.length;
      const cluster = await LocalEtcdCluster.start({ size: 3 });
      try {
        await measurePromptness({ ...base, node: nodes[0].path, nodeVersion: nodes[0].version }, cluster);
      } finally {
        await cluster.destroy();
      }
      for (const row of results.rows.slice(first)) row.section = `${row.section} · node ${nodes[0].version} · etcd ${etcdVersion}`;
    }
    if (wanted('soak')) {
      const first = results.rows.length;
      await measureSoak({ ...base, node: nodes[0].path, nodeVersion: nodes[0].version });
      for (const row of results.rows.slice(first)) row.section = `${row.section} · etcd ${etcdVersion}`;
    }
    if (wanted('defrag')) {
      // A cluster of its own: its data grows by design, which would skew the other sections' figures.
      const first = results.rows.length;
      const cluster = await LocalEtcdCluster.start({ size: 3 });
      const ctx: BenchContext = { ...base, node: nodes[0].path, nodeVersion: nodes[0].version };
      const endpoints = cluster.clientURLs();
      const agent = await AgentProcess.start({
        endpoints,
        localEndpoint: endpoints[0],
        memberName: cluster.members[0].name,
        workDir,
        label: 'defrag-etcd-0',
        node: nodes[0].path,
      });
      try {
        await measureDefrag(ctx, cluster, agent);
      } finally {
        await agent.stop();
        await cluster.destroy();
      }
      for (const row of results.rows.slice(first)) row.section = `${row.section} · etcd ${etcdVersion}`;
    }
    if (wanted('backup')) {
      // A cluster of its own: it is filled with a database worth backing up.
      const first = results.rows.length;
      const cluster = await LocalEtcdCluster.start({ size: 3, extraArgs: ['--quota-backend-bytes=4294967296', '--snapshot-count=100'] });
      try {
        await measureBackup({ ...base, node: nodes[0].path, nodeVersion: nodes[0].version }, cluster);
      } finally {
        await cluster.destroy();
      }
      for (const row of results.rows.slice(first)) row.section = `${row.section} · etcd ${etcdVersion}`;
    }
  } finally {
    if (!process.env.BENCH_KEEP) fs.rmSync(workDir, { recursive: true, force: true });
    else base.log(`kept ${workDir}`);
  }

  for (const row of results.rows.filter((r) => r.pass === false)) {
    results.notes.unshift(`MISSED: ${row.figure} = ${round(row.value)} ${row.unit} (target ${row.target}).`);
  }
  results.notes.unshift(
    `Agents under test ran as separate processes (the bin, dist/bin/etcd-lifecycle-agent.js serve, on node ${results.settings.nodes}) at ETCD_AGENT_LOG_LEVEL=warn; the load generator (autocannon) ran in the bench process.`,
  );
  results.durationSeconds = (performance.now() - began) / 1000;
  results.loadAverageAtEnd = os.loadavg().map((l) => Math.round(l * 100) / 100);
  const out = process.env.BENCH_OUT ?? path.join(process.cwd(), 'bench-results.json');
  writeJson(out, results);
  process.stdout.write(`${renderReport(results)}\n\nJSON: ${out}\n`);
}

/** The node binaries of BENCH_NODES, else this process's node and Node 24 (scripts/node24.sh), each once. */
function nodeBinaries(): Array<{ path: string; version: string }> {
  let paths = (process.env.BENCH_NODES ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (paths.length === 0) {
    paths = [process.execPath];
    try {
      paths.push(execFileSync('bash', [path.join(__dirname, '../../../scripts/node24.sh')], { encoding: 'utf8' }).trim());
    } catch (err) {
      process.stderr.write(`bench: no Node 24 (scripts/node24.sh failed: ${String(err)}); measuring on ${process.version} only\n`);
    }
  }
  const nodes = paths.map((p) => ({ path: p, version: execFileSync(p, ['--version'], { encoding: 'utf8' }).trim() }));
  return nodes.filter((n, i) => nodes.findIndex((m) => m.version === n.version) === i);
}

function memoryRows(results: Results, idle?: { idleRssMiB: number; bareRssMiB: number }, load?: { peakRssMiB: number }): void {
  const section = 'start-up and memory';
  if (idle !== undefined) {
    results.rows.push(
      compared(
        section,
        'resident memory, idle (after one /v1/health, 2 s settle)',
        idle.idleRssMiB,
        'MiB',
        { name: 'bare Node HTTP server', value: idle.bareRssMiB },
        'agent ÷ bare',
        {
          target: `≤ bare + ${IDLE_MARGIN_MIB} MiB`,
          pass: idle.idleRssMiB <= idle.bareRssMiB + IDLE_MARGIN_MIB,
        },
      ),
    );
  }
  if (load !== undefined) {
    results.rows.push({
      section,
      figure: 'resident memory, peak under the /v1/health load',
      value: load.peakRssMiB,
      unit: 'MiB',
      ...(idle === undefined
        ? {}
        : {
            baseline: { name: 'agent idle', value: idle.idleRssMiB, unit: 'MiB' },
            ratio: { value: load.peakRssMiB / idle.idleRssMiB, of: 'load ÷ idle' },
          }),
      target: `≤ ${PEAK_RATIO}× idle`,
      pass: idle === undefined ? undefined : load.peakRssMiB <= PEAK_RATIO * idle.idleRssMiB,
    });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
