/**
 * Detection: SIGKILL two of three voters (quorum lost) and time until
 * /v1/health answers `unavailable`, polled every 20 ms as a busy prober would;
 * beside etcd's own /health on the surviving member, polled the same way.
 * The kill lands at a random moment of the agent's observation cycle.
 */
import type { BenchContext, ClusterUnderTest } from './context';
import { pick } from './context';
import { HttpClient } from './http';
import { median, round, sleep, summarize } from './stats';

/** Fires a GET every `everyMs` (not waiting for earlier ones) and notes the first answer `isDown` accepts. */
class Poller {
  downAt?: number;
  private stopped = false;
  private readonly client: HttpClient;
  private readonly loop: Promise<void>;

  constructor(base: string, path: string, isDown: (status: number, body: unknown) => boolean, everyMs = 20) {
    this.client = new HttpClient(base, 64);
    this.loop = this.run(path, isDown, everyMs);
  }

  private async run(path: string, isDown: (status: number, body: unknown) => boolean, everyMs: number): Promise<void> {
    while (!this.stopped) {
      void this.client.get(path, 5000).then(
        (a) => {
          if (this.downAt === undefined && isDown(a.status, a.body)) this.downAt = performance.now();
        },
        () => undefined,
      );
      await sleep(everyMs);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
    this.client.close();
  }
}

/** Measures how fast loss of quorum shows on /v1/health. */
export async function measureDetection(ctx: BenchContext, cut: ClusterUnderTest): Promise<void> {
  const reps = pick(ctx, 6, 2);
  const names = cut.cluster.members.slice(0, 3).map((m) => m.name);
  const agentMs: number[] = [];
  const etcdMs: number[] = [];
  for (let r = 0; r < reps; r++) {
    // Alternate which voter survives: the agent's own (first) endpoint, or another.
    const killed = r % 2 === 0 ? [names[1], names[2]] : [names[0], names[1]];
    const survivor = names.find((n) => !killed.includes(n)) ?? names[0];
    await waitHealthy(cut);
    const agentPoll = new Poller(
      cut.agent.url,
      '/v1/health',
      (status, body) => status === 503 && (body as { status?: string }).status === 'unavailable',
    );
    const etcdPoll = new Poller(
      cut.cluster.member(survivor).clientURL,
      '/health',
      (_status, body) => (body as { health?: string }).health !== 'true',
    );
    await sleep(300 + Math.random() * 1000);
    const killedAt = performance.now();
    await Promise.all(killed.map((n) => cut.cluster.kill(n)));
    const until = performance.now() + 15_000;
    while ((agentPoll.downAt === undefined || etcdPoll.downAt === undefined) && performance.now() < until) await sleep(10);
    await Promise.all([agentPoll.stop(), etcdPoll.stop()]);
    if (agentPoll.downAt === undefined) throw new Error('the agent never answered unavailable');
    agentMs.push(agentPoll.downAt - killedAt);
    if (etcdPoll.downAt !== undefined) etcdMs.push(etcdPoll.downAt - killedAt);
    ctx.log(
      `detection ${r + 1}/${reps}: agent ${round(agentMs[agentMs.length - 1], 0)} ms, etcd /health ${etcdPoll.downAt === undefined ? 'never' : `${round(etcdPoll.downAt - killedAt, 0)} ms`}`,
    );
    await Promise.all(killed.map((n) => cut.cluster.restart(n)));
  }
  await waitHealthy(cut);
  const worst = Math.max(...agentMs);
  ctx.rows.push({
    section: 'detection',
    figure: `2 of 3 voters killed → /v1/health unavailable, p50 (n=${reps}, max ${Math.round(worst)} ms)`,
    value: median(agentMs),
    unit: 'ms',
    baseline: { name: "etcd's /health on the survivor says false, p50", value: median(etcdMs), unit: 'ms' },
    ratio: { value: median(agentMs) / median(etcdMs), of: 'agent ÷ etcd' },
    target: '≤ 2× etcd',
    pass: median(agentMs) / median(etcdMs) <= 2,
    detail: { agent: summarize(agentMs), etcd: summarize(etcdMs) },
  });
}

async function waitHealthy(cut: ClusterUnderTest): Promise<void> {
  const until = performance.now() + 30_000;
  for (;;) {
    const answer = await cut.agent.http.get('/v1/health');
    if (answer.status === 200 && (answer.body as { status?: string }).status === 'healthy') return;
    if (performance.now() > until)
      throw new Error(`the agent never saw the cluster healthy again: ${JSON.stringify(answer.body).slice(0, 300)}`);
    await sleep(100);
  }
}
