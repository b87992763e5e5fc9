/**
 * Scale: a 7-member cluster, join + leave of an 8th member (a learner that
 * never starts) ×100 through the agent, with /v1/health polled beside it.
 * Before, halfway and after (each after a settle): resident memory, heap after
 * a forced GC, open descriptors and sockets, live timers and handles (from
 * inside the process, handle-probe.ts) and etcd leases (`etcdctl lease list`).
 * A leak grows with the cycles; noise does not grow from the middle to the end.
 */
import { LocalEtcdCluster } from '../local-cluster';
import { AgentProcess } from './agent-process';
import type { BenchContext } from './context';
import { pick } from './context';
import type { Row } from './report';
import { freshMember, untilAddsAccepted } from './scale';
import { median, round, sleep } from './stats';

interface Snapshot {
  rssMiB: number;
  heapMiB: number;
  /** V8 heap committed (heapTotal) and its young generation's share: they grow once, to their limits. */
  heapCommittedMiB: number;
  newSpaceMiB: number;
  fds: number;
  sockets: number;
  timers: number;
  handles: number;
  leases: number;
}

/** Runs the join/leave cycles on a 7-member cluster and reports growth. */
export async function measureSoak(ctx: BenchContext): Promise<void> {
  const cycles = pick(ctx, 100, 20);
  const cluster = await LocalEtcdCluster.start({ size: 7, name: 'soak' });
  const endpoints = cluster.clientURLs();
  let agent: AgentProcess | undefined;
  const joinMs: number[] = [];
  const leaveMs: number[] = [];
  try {
    agent = await AgentProcess.start({
      endpoints,
      localEndpoint: endpoints[0],
      memberName: cluster.members[0].name,
      workDir: ctx.workDir,
      label: 'soak',
      handleProbe: true,
    });
    const a = agent;
    const cycle = async (): Promise<void> => {
      const spec = await freshMember(cluster, 'soak-7');
      const join = await a.http.post('/v1/members/join', { name: spec.name, peerURLs: [spec.peerURL] });
      if (join.status !== 202) throw new Error(`soak join: ${join.status} ${JSON.stringify(join.body).slice(0, 300)}`);
      const leave = await a.http.post('/v1/members/leave', { name: spec.name, peerURLs: [spec.peerURL] });
      if (leave.status !== 200) throw new Error(`soak leave: ${leave.status} ${JSON.stringify(leave.body).slice(0, 300)}`);
      joinMs.push(join.ms);
      leaveMs.push(leave.ms);
    };
    const snapshot = async (): Promise<Snapshot> => {
      await sleep(pick(ctx, 3000, 1500)); // settle: answers sent, leases revoked, sockets closed
      const inside = await a.handles();
      const leases = Number(/found (\d+) leases/.exec(await cluster.etcdctl(['lease', 'list']))?.[1] ?? NaN);
      const count = (kind: string): number => inside.resources[kind] ?? 0;
      return {
        rssMiB: a.rssMiB(),
        heapMiB: inside.heapUsedBytes / 2 ** 20,
        heapCommittedMiB: inside.memory.heapTotal / 2 ** 20,
        newSpaceMiB: (inside.heapSpaces.new_space?.committed ?? 0) / 2 ** 20,
        fds: a.fdCount(),
        sockets: a.socketCount(),
        timers: count('Timeout'),
        handles: Object.values(inside.resources).reduce((x, y) => x + y, 0),
        leases,
      };
    };
    // /v1/health beside the cycles, as a prober would, so the observer's paths run too.
    const cyclesWithProbe = async (n: number): Promise<void> => {
      let polling = true;
      const poller = (async () => {
        while (polling) {
          await a.http.get('/v1/health').catch(() => undefined);
          await sleep(100);
        }
      })();
      try {
        for (let i = 0; i < n; i++) await cycle();
      } finally {
        polling = false;
        await poller;
      }
    };

    await untilAddsAccepted({ agent: a }, await freshMember(cluster, 'soak-7'));
    // Warm-up: V8 grows its young generation to its limit (2 × 16 MiB semi-spaces) over the first
    // cycles and keeps it; that one-time step is reported, then growth is measured from there.
    const start = await snapshot();
    const warmUp = pick(ctx, 25, 10);
    await cyclesWithProbe(warmUp);
    joinMs.length = 0;
    leaveMs.length = 0;
    const before = await snapshot();
    await cyclesWithProbe(cycles / 2);
    const middle = await snapshot();
    await cyclesWithProbe(cycles / 2);
    const after = await snapshot();
    ctx.log(
      `soak: ${cycles} cycles, RSS ${round(before.rssMiB)} → ${round(middle.rssMiB)} → ${round(after.rssMiB)} MiB, fds ${before.fds} → ${after.fds}, leases ${before.leases} → ${after.leases}`,
    );

    const section = `scale: 7 members, join+leave ×${cycles}`;
    const row = (figure: string, key: keyof Snapshot, unit: string, tolerance: number, targetText: string): Row => {
      const growth = after[key] - before[key];
      const lateGrowth = after[key] - middle[key];
      return {
        section,
        figure: `${figure}: after (before ${round(before[key], 1)}, halfway ${round(middle[key], 1)}; Δ ${growth >= 0 ? '+' : ''}${round(growth, 2)})`,
        value: after[key],
        unit,
        baseline: { name: 'before the cycles', value: before[key], unit },
        ratio: {
          value: before[key] === 0 ? (after[key] === 0 ? 1 : Number.POSITIVE_INFINITY) : after[key] / before[key],
          of: 'after ÷ before',
        },
        target: targetText,
        // Growth beyond noise: more than the tolerance overall, or still growing in the second half.
        pass: growth <= tolerance && lateGrowth <= tolerance / 2 + 1e-9,
        detail: { before: before[key], middle: middle[key], after: after[key] },
      };
    };
    ctx.notes.push(
      `scale: during the ${warmUp} warm-up cycles before the first snapshot, resident memory went ${round(start.rssMiB, 1)} → ${round(before.rssMiB, 1)} MiB ` +
        `while the heap in use after GC went ${round(start.heapMiB, 1)} → ${round(before.heapMiB, 1)} MiB: V8's young generation grew ` +
        `${round(start.newSpaceMiB, 1)} → ${round(before.newSpaceMiB, 1)} MiB committed (heap committed ${round(start.heapCommittedMiB, 1)} → ${round(before.heapCommittedMiB, 1)} MiB), ` +
        `a one-time step to its limit; after it, young generation ${round(before.newSpaceMiB, 1)} → ${round(after.newSpaceMiB, 1)} MiB.`,
    );
    ctx.rows.push(
      row('resident memory', 'rssMiB', 'MiB', 8, 'Δ ≤ 8 MiB'),
      row('heap after GC', 'heapMiB', 'MiB', 2, 'Δ ≤ 2 MiB'),
      row('open descriptors', 'fds', '', 2, 'Δ ≤ 2'),
      row('open sockets', 'sockets', '', 2, 'Δ ≤ 2'),
      row('live timers', 'timers', '', 2, 'Δ ≤ 2'),
      row('live handles (all kinds)', 'handles', '', 3, 'Δ ≤ 3'),
      row('etcd leases', 'leases', '', 0, 'Δ = 0'),
      {
        section,
        figure: 'join (learner added) p50 on 7 members',
        value: median(joinMs),
        unit: 'ms',
        baseline: { name: 'leave (removed) p50', value: median(leaveMs), unit: 'ms' },
      },
    );
  } finally {
    await agent?.stop();
    await cluster.destroy();
  }
}
