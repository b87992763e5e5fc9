/**
 * The `defrag` section: the agent's rolling defragmentation (POST /v1/maintenance/defragment: one
 * member at a time, the leader last after leadership moved) against `etcdctl defrag --cluster` (every
 * member in turn, the leader in place), in the same run, on the same cluster and the same data:
 * before each round the same keys are written again the same way and the history compacted the same
 * way, then one writer per member puts through that member while the round runs. Rounds alternate
 * (agent, etcdctl, agent, …) so that neither gets the quieter half of a shared machine.
 *
 * A lease keep-alive loop per member runs beside the writers: etcd renews a lease on the leader only
 * once the leader has applied everything committed, so while the leader is defragmented in place no
 * keep-alive of the cluster is answered (writes through the other members go on: the leader's raft
 * loop still commits). That is the figure moving leadership away first is for.
 *
 * Figures, each while the leader (the agent: the former leader, a follower by then) was defragmented:
 * the longest stretch with no keep-alive answered through any member, the longest write gap through
 * the other members; and each member's defragmentation time, from etcd's own log lines.
 */
import type { LocalEtcdCluster } from '../local-cluster';
import { defragIntervals, KeepAliveLoad, WriteLoad, writeKeys, type Interval } from '../defrag-watch';
import { AgentProcess } from './agent-process';
import type { BenchContext } from './context';
import { pick } from './context';
import { HttpClient } from './http';
import { median, round, sleep } from './stats';

/** What one round measured. */
interface Round {
  how: 'agent' | 'etcdctl';
  /** While the leader was defragmented (the agent: the former leader, after the move): the longest stretch with no keep-alive answered through any member. */
  keepAliveGapMs: number;
  /** The same, for writes through the members other than the leader. */
  leaderGapOthersMs: number;
  /** How long the leader's defragmentation took. */
  leaderDefragMs: number;
  /** Each member's defragmentation, from its log. */
  defragMs: number[];
  /** From the first defragmentation's start to the last one's end. */
  totalMs: number;
}

/** The leader's member name, as a member's gateway Status says. */
async function leaderName(cluster: LocalEtcdCluster): Promise<string> {
  const client = new HttpClient(cluster.members[0].clientURL);
  try {
    const status = (await client.post('/v3/maintenance/status', {}, 5000)).body as { leader?: string };
    const leaderId = BigInt(status.leader ?? '0').toString(16);
    const member = (await cluster.listMembers()).find((m) => m.id === leaderId);
    if (member === undefined) throw new Error(`leader ${leaderId} is not in the member list`);
    return member.name;
  } finally {
    client.close();
  }
}

/** The current revision, from a range's header. */
async function revision(clientURL: string): Promise<number> {
  const client = new HttpClient(clientURL);
  try {
    const answer = (await client.post('/v3/kv/range', { key: Buffer.from('bench').toString('base64') }, 5000)).body as {
      header?: { revision?: string };
    };
    return Number(answer.header?.revision ?? 0);
  } finally {
    client.close();
  }
}

/** The same data before every round: the keys written twice more, the history compacted to the current revision. */
async function prepareData(cluster: LocalEtcdCluster, load: { keys: number; bytes: number }): Promise<void> {
  const url = cluster.members[0].clientURL;
  await writeKeys(url, { ...load, passes: 2 });
  await cluster.etcdctl(['compact', String(await revision(url)), '--physical']);
}

async function oneRound(ctx: BenchContext, cluster: LocalEtcdCluster, agent: AgentProcess, how: Round['how']): Promise<Round> {
  const leader = await leaderName(cluster);
  const since = Date.now();
  const load = new WriteLoad(cluster.members);
  const keepAlives = new KeepAliveLoad(cluster.members);
  await sleep(500);
  try {
    if (how === 'agent') {
      for (;;) {
        const answer = await agent.http.post(
          '/v1/maintenance/defragment',
          { compact: false, minFragmentation: 0.2, minDbSizeBytes: 0, timeoutSeconds: 60 },
          70_000,
        );
        const body = answer.body as { complete?: boolean; members?: unknown[] };
        if (answer.status === 200 && body.complete === true) {
          if ((body.members ?? []).length !== cluster.members.length)
            throw new Error(`the agent defragmented ${(body.members ?? []).length} members: ${JSON.stringify(body).slice(0, 500)}`);
          break;
        }
        if (answer.status !== 202) throw new Error(`defragment answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 500)}`);
      }
    } else {
      await cluster.etcdctl(['defrag', '--cluster', '--command-timeout=120s']);
    }
    await sleep(500);
  } finally {
    await Promise.all([load.stop(), keepAlives.stop()]);
  }
  const intervals = new Map(cluster.members.map((m) => [m.name, defragIntervals(m.logFile).filter((i) => i.to >= since)]));
  const all = [...intervals.values()].flat();
  const leaderWindow: Interval = intervals.get(leader)?.at(-1) ?? { from: 0, to: 0 };
  const others = cluster.members.map((m) => m.name).filter((n) => n !== leader);
  const round1: Round = {
    how,
    keepAliveGapMs: keepAlives.longestClusterGap(leaderWindow),
    leaderGapOthersMs: Math.max(...others.map((n) => load.longestGap(n, leaderWindow))),
    leaderDefragMs: leaderWindow.to - leaderWindow.from,
    defragMs: all.map((i) => i.to - i.from),
    totalMs: Math.max(...all.map((i) => i.to)) - Math.min(...all.map((i) => i.from)),
  };
  ctx.log(
    `defrag ${how}: leader ${leader} defragmented in ${round1.leaderDefragMs} ms; meanwhile no keep-alive answered for ${round1.keepAliveGapMs} ms, writes through the others ${round1.leaderGapOthersMs} ms; per member ${round1.defragMs.join(', ')} ms`,
  );
  return round1;
}

/** Runs the section on `cluster` (3 members) with `agent` (the sidecar of etcd-0). */
export async function measureDefrag(ctx: BenchContext, cluster: LocalEtcdCluster, agent: AgentProcess): Promise<void> {
  const section = 'rolling defragmentation';
  const rounds = pick(ctx, 3, 1);
  const load = pick(ctx, { keys: 40_000, bytes: 1000 }, { keys: 15_000, bytes: 1000 });
  const results: Round[] = [];
  for (let i = 0; i < rounds; i++) {
    for (const how of ['agent', 'etcdctl'] as const) {
      await prepareData(cluster, load);
      results.push(await oneRound(ctx, cluster, agent, how));
    }
  }
  const of = (how: Round['how'], pickOne: (r: Round) => number): number => median(results.filter((r) => r.how === how).map(pickOne));
  const row = (
    figure: string,
    pickOne: (r: Round) => number,
    target?: string,
    pass?: (agent: number, etcdctl: number) => boolean,
  ): void => {
    const a = of('agent', pickOne);
    const e = of('etcdctl', pickOne);
    ctx.rows.push({
      section,
      figure,
      value: round(a),
      unit: 'ms',
      baseline: { name: 'etcdctl defrag --cluster, same data', value: round(e), unit: 'ms' },
      ratio: { value: round(a / e, 3), of: 'agent ÷ etcdctl' },
      ...(target === undefined ? {} : { target, pass: pass?.(a, e) }),
      detail: {
        rounds: results.filter((r) => r.how === 'agent').length,
        agent: results.filter((r) => r.how === 'agent'),
        etcdctl: results.filter((r) => r.how === 'etcdctl'),
      },
    });
  };
  row(
    `while the leader is defragmented: longest stretch with no lease keep-alive answered, median of ${rounds}`,
    (r) => r.keepAliveGapMs,
    '< etcdctl',
    (a, e) => a < e,
  );
  row('while the leader is defragmented: longest write gap through the other members', (r) => r.leaderGapOthersMs);
  row('the leader’s defragmentation', (r) => r.leaderDefragMs);
  row('a member’s defragmentation, median', (r) => median(r.defragMs));
  row('first defragmentation start → last end', (r) => r.totalMs);
  ctx.notes.push(
    `defrag: ${load.keys} keys of ${load.bytes} B written twice and compacted before each round (the same data for both); one writer and one lease keep-alive loop per member, each through that member, meanwhile; times of each member's defragmentation from etcd's own log; rounds alternate agent, etcdctl.`,
  );
}
