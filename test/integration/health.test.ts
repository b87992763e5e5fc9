/**
 * Truthful health against a real 3-member etcd (docs/api.md §4 GET /v1/health, /v1/health/local,
 * /metrics): what the agent says while members run, hang (SIGSTOP), crash (SIGKILL), lose quorum
 * and all die, and that the load on etcd does not grow with the request rate.
 *
 * While a member is down, the answers are recorded (helpers/health-record.ts) and judged by their
 * observations: every observation that began after the member went down and was answered before it
 * came back must see it down, and no answer is older than the max age. How soon the answers change
 * is the bench's figure (scripts/bench/detection.ts), not this test's.
 *
 * One cluster tells the story; each test leaves it healthy for the next.
 */
import type { RunningAgent } from '../../agent/agent';
import { withCluster } from '../helpers/etcd-cluster';
import { eventually } from '../helpers/eventually';
import type { LocalEtcdCluster } from '../helpers/etcd-cluster';
import { HealthAnswer, HealthRecorder } from '../helpers/health-record';
import { Answer, call } from '../helpers/http-call';
import { get, startMemberAgent } from '../helpers/membership';
import { itOnFirstVersion } from '../helpers/version-scope';

const MAX_AGE_MS = 1000; // ETCD_AGENT_HEALTH_MAX_AGE_MS default
const NAMES = ['etcd-0', 'etcd-1', 'etcd-2'];

describe('GET /v1/health and /v1/health/local against real etcd', () => {
  const cluster = withCluster(3);
  let agent: RunningAgent;
  const others: RunningAgent[] = [];

  beforeAll(async () => {
    agent = await startMemberAgent(cluster(), 'etcd-0');
  });

  afterAll(async () => {
    await Promise.all([agent, ...others].map((a) => a?.stop(2000)));
  });

  /** An agent beside member `name` (its local endpoint), stopped after the suite. */
  async function agentOf(name: string): Promise<RunningAgent> {
    const started = await startMemberAgent(cluster(), name);
    others.push(started);
    return started;
  }

  const health = (path = '/v1/health'): Promise<Answer> => get(agent, path);

  /** The first answer with `status`, and when it was asked for. */
  async function waitFor(status: string, timeoutMs = 15_000): Promise<Answer & { askedAt: number }> {
    return eventually(
      async () => {
        const askedAt = Date.now();
        const answer = await health();
        if (answer.json?.status !== status) throw new Error(`status is ${answer.json?.status}: ${answer.text.slice(0, 400)}`);
        return { ...answer, askedAt };
      },
      { within: timeoutMs, every: 100 },
    );
  }

  it('when all three members run, then 200 healthy with fault tolerance 1, one leader and an age within the max age', async () => {
    const answer = await waitFor('healthy');
    const body = answer.json;

    expect(answer.status).toBe(200);
    expect(answer.headers['cache-control']).toBe('no-store');
    expect(typeof body.requestId).toBe('string');
    expect(body.quorum).toEqual({ voters: 3, healthyVoters: 3, required: 2, hasQuorum: true, faultTolerance: 1 });
    expect(body.ageMs).toBeGreaterThanOrEqual(0);
    expect(body.ageMs).toBeLessThanOrEqual(MAX_AGE_MS);
    // No older than the max age when it answered, which was after it was asked (however slow the way back).
    expect(Date.parse(body.observedAt)).toBeGreaterThanOrEqual(answer.askedAt - MAX_AGE_MS);
    const leaders = body.members.filter((m: { isLeader: boolean }) => m.isLeader);
    expect(leaders).toHaveLength(1);
    expect(body.leader).toEqual({ id: leaders[0].id, name: leaders[0].name });
    expect(body.members.map((m: { name: string }) => m.name).sort()).toEqual(NAMES);
    for (const m of body.members) {
      expect(m).toMatchObject({ isLearner: false, started: true, reachable: true, errors: [] });
      expect(m.id).toMatch(/^[0-9a-f]+$/);
      expect(m.raftTerm).toBeGreaterThan(0);
      expect(m.raftIndex).toBeGreaterThan(0);
      expect(m.raftAppliedIndex).toBeGreaterThan(0);
      expect(m.dbSizeBytes).toBeGreaterThan(0);
      expect(m.latencyMs).toBeGreaterThanOrEqual(0);
    }
    expect(body).toMatchObject({ alarms: [], errors: [], operations: [] });
  });

  // The agent's own bookkeeping, alike against every etcd: on the run's first version (version-scope.ts).
  itOnFirstVersion('when /metrics is scraped, then the health gauges show this moment and the age is computed at the scrape', async () => {
    const text = (await get(agent, '/metrics')).text;

    expect(text).toMatch(/^etcd_agent_cluster_healthy 1$/m);
    expect(text).toMatch(/^etcd_agent_quorum_healthy_voters 3$/m);
    expect(text).toMatch(/^etcd_agent_quorum_voters 3$/m);
    for (const name of NAMES) expect(text).toContain(`etcd_agent_member_reachable{member="${name}"} 1`);
    const age = Number(/^etcd_agent_health_observation_age_seconds (\S+)$/m.exec(text)?.[1]);
    expect(age).toBeGreaterThanOrEqual(0);
    expect(age).toBeLessThanOrEqual(MAX_AGE_MS / 1000);
    expect(text).toMatch(/^etcd_agent_health_observations_total\{result="healthy"\} \d+$/m);
  });

  it.each<[string, number, string, object]>([
    ['exactly the members', 200, 'etcd-2,etcd-0,etcd-1', { status: 'healthy', expected: { missing: [], unexpected: [] } }],
    ['one more name', 200, 'etcd-0,etcd-1,etcd-2,etcd-3', { status: 'degraded', expected: { missing: ['etcd-3'], unexpected: [] } }],
    ['one name fewer', 200, 'etcd-0,etcd-1', { status: 'degraded', expected: { missing: [], unexpected: ['etcd-2'] } }],
    ['a name that is not DNS-1123', 400, 'etcd-0,Etcd_1', { error: { code: 'bad-request' } }],
    ['an empty name', 400, 'etcd-0,,etcd-1', { error: { code: 'bad-request' } }],
  ])('when ?expected= names %s, then %i', async (_what, status, expected, body) => {
    const answer = await health(`/v1/health?expected=${encodeURIComponent(expected)}`);

    expect(answer.status).toBe(status);
    expect(answer.json).toMatchObject(body);
  });

  it.each([['/v1/health?verbose=1'], ['/v1/health?expected=etcd-0&expected=etcd-1'], ['/v1/health/local?expected=etcd-0']])(
    'when %s is asked, then 400 bad-request',
    async (path) => {
      const answer = await health(path);

      expect(answer.status).toBe(400);
      expect(answer.json.error).toMatchObject({ code: 'bad-request', retryable: false });
    },
  );

  // The agent's own bookkeeping, alike against every etcd: on the run's first version (version-scope.ts).
  itOnFirstVersion(
    'when 500 requests arrive at once, then all answer and etcd sees no more Status calls than members × observations',
    async () => {
      // Nothing cached: the burst comes once the newest observation has passed the max age, so all
      // 500 must share observations begun for them.
      const newest = Date.parse((await waitFor('healthy')).json.observedAt);
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, newest + MAX_AGE_MS + 1 - Date.now())));
      const statusBefore = await counter(agent, 'statusRpcs');
      const observationsBefore = await counter(agent, 'healthObservations');
      const started = performance.now();

      const answers = await Promise.all(
        Array.from({ length: 500 }, () => call(agent.listening.url, { path: '/v1/health', timeoutMs: 30_000 })),
      );

      const elapsedMs = performance.now() - started;
      const statusCalls = (await counter(agent, 'statusRpcs')) - statusBefore;
      const observations = (await counter(agent, 'healthObservations')) - observationsBefore;
      expect(answers.map((a) => a.status)).toEqual(Array(500).fill(200));
      expect(new Set(answers.map((a) => a.json.status))).toEqual(new Set(['healthy']));
      expect(answers.every((a) => a.json.ageMs <= MAX_AGE_MS)).toBe(true);
      // Load follows time, not requests: at most one observation per max age (plus the one in flight).
      expect(observations).toBeGreaterThanOrEqual(1);
      expect(observations).toBeLessThanOrEqual(Math.ceil(elapsedMs / MAX_AGE_MS) + 1);
      // The membership service's auto-promotion asks the local etcd once a second; allow for it.
      const autoPromotion = Math.ceil(elapsedMs / 1000) + 1;
      expect(statusCalls).toBeLessThanOrEqual(3 * observations + autoPromotion);
      process.stdout.write(`500 requests in ${Math.round(elapsedMs)} ms: ${observations} observation(s), ${statusCalls} Status RPCs\n`);
    },
  );

  it('when /v1/health/local is asked beside the leader and beside a follower, then 200 with role leader and follower', async () => {
    const leaderName = (await waitFor('healthy')).json.leader.name as string;
    const followerName = NAMES.find((n) => n !== leaderName) as string;
    const [beside, besideFollower] = await Promise.all([agentOf(leaderName), agentOf(followerName)]);

    const [leader, follower] = await Promise.all([get(beside, '/v1/health/local'), get(besideFollower, '/v1/health/local')]);

    expect(leader.status).toBe(200);
    expect(leader.json).toMatchObject({
      name: leaderName,
      role: 'leader',
      isLeader: true,
      reachable: true,
      isLearner: false,
      started: true,
    });
    expect(follower.status).toBe(200);
    expect(follower.json).toMatchObject({ name: followerName, role: 'follower', isLeader: false, reachable: true, errors: [] });
    for (const key of ['id', 'raftTerm', 'raftIndex', 'raftAppliedIndex', 'dbSizeBytes', 'latencyMs', 'ageMs']) {
      expect(follower.json).toHaveProperty(key);
    }
    expect(follower.json.ageMs).toBeLessThanOrEqual(MAX_AGE_MS);
  });

  it('when a follower is frozen (SIGSTOP), then every observation begun while it is frozen says degraded with it unreachable, and once resumed healthy again', async () => {
    const c = cluster();
    const frozen = await followerOf(c);
    const record = new HealthRecorder(agent.listening.url).start();
    c.pause(frozen);
    const pausedAt = Date.now();
    let resumedAt = Infinity;
    try {
      const answer = await record.waitFor((a) => a.status === 'degraded' && (a.observedAt ?? 0) >= pausedAt);

      expect(answer.http).toBe(200);
      expect(answer.json.quorum).toMatchObject({ voters: 3, healthyVoters: 2, hasQuorum: true, faultTolerance: 0 });
      const local = await get(await agentOf(frozen), '/v1/health/local');
      expect(local.status).toBe(503);
      expect(local.json).toMatchObject({ name: frozen, reachable: false, role: null, error: { code: 'unavailable' } });
    } finally {
      resumedAt = Date.now();
      c.resume(frozen);
    }
    await record.waitFor((a) => a.status === 'healthy' && (a.observedAt ?? 0) >= resumedAt);
    const answers = await record.stop();

    expectTruthful(answers, { down: [frozen], from: pausedAt, to: resumedAt });
  });

  it('when the local member is stopped, then /v1/health/local is 503 and /v1/health degraded; restarted, 200 again', async () => {
    const c = cluster();
    const stopped = await followerOf(c);
    const beside = await agentOf(stopped);
    const record = new HealthRecorder(agent.listening.url).start();
    const localRecord = new HealthRecorder(beside.listening.url, '/v1/health/local').start();
    await c.kill(stopped);
    const killedAt = Date.now();

    const local = await localRecord.waitFor((a) => (a.observedAt ?? 0) >= killedAt);
    expect(local.http).toBe(503);
    expect(local.json).toMatchObject({
      name: stopped,
      reachable: false,
      role: null,
      raftIndex: null,
      error: { code: 'unavailable', retryable: true },
    });
    expect(local.json.errors.join(' ')).toMatch(/did not answer/);
    const degraded = await record.waitFor((a) => a.status === 'degraded' && (a.observedAt ?? 0) >= killedAt);
    expect(degraded.json.quorum).toMatchObject({ healthyVoters: 2, hasQuorum: true });

    const restartedAt = Date.now();
    await c.restart(stopped);

    const back = await localRecord.waitFor((a) => a.http === 200 && (a.observedAt ?? 0) >= restartedAt);
    expect(back.json).toMatchObject({ name: stopped, role: 'follower', reachable: true });
    await record.waitFor((a) => a.status === 'healthy' && (a.observedAt ?? 0) >= restartedAt);
    const [answers, locals] = await Promise.all([record.stop(), localRecord.stop()]);

    expectTruthful(answers, { down: [stopped], from: killedAt, to: restartedAt });
    // Every answer about the stopped member, from an observation begun while it was down, is 503.
    const whileDown = locals.filter((a) => a.observedAt !== undefined && a.observedAt >= killedAt && a.at <= restartedAt);
    expect(whileDown.filter((a) => a.http !== 503 || a.json?.reachable !== false)).toEqual([]);
  });

  it('when two of three members are stopped, then 503 unavailable with hasQuorum false; restarted, healthy again', async () => {
    const c = cluster();
    const gone = ['etcd-1', 'etcd-2'];
    const record = new HealthRecorder(agent.listening.url).start();
    await Promise.all(gone.map((n) => c.kill(n)));
    const killedAt = Date.now();

    const answer = await record.waitFor((a) => (a.observedAt ?? 0) >= killedAt);

    expect(answer.http).toBe(503);
    expect(answer.json.quorum).toMatchObject({ voters: 3, required: 2, hasQuorum: false, faultTolerance: 0 });
    expect(answer.json.quorum.healthyVoters).toBeLessThan(2);
    expect(answer.json.error).toMatchObject({ code: 'unavailable', retryable: true });
    expect(answer.json.error.message).toMatch(/quorum needs 2/);
    for (const name of gone) {
      expect(answer.json.members.find((m: { name: string }) => m.name === name)).toMatchObject({ reachable: false });
    }

    const restartedAt = Date.now();
    await Promise.all(gone.map((n) => c.restart(n)));
    await record.waitFor((a) => a.status === 'healthy' && (a.observedAt ?? 0) >= restartedAt, 20_000);
    const answers = await record.stop();

    expectTruthful(answers, { down: gone, from: killedAt, to: restartedAt });
    // Without a quorum every observation says so: never degraded, let alone healthy.
    const whileDown = answers.filter((a) => a.observedAt !== undefined && a.observedAt >= killedAt && a.at <= restartedAt);
    expect(whileDown.filter((a) => a.http !== 503 || a.status !== 'unavailable')).toEqual([]);
  });

  // The agent's own bookkeeping, alike against every etcd: on the run's first version (version-scope.ts).
  itOnFirstVersion(
    'when all three members are killed (SIGKILL), then no answer is healthy past the max age, every later one is 503 unavailable or unknown, and after the first 503 none is 200; restarted, healthy again',
    async () => {
      const c = cluster();
      await waitFor('healthy');
      await health(); // a healthy observation is cached right now: it must not outlive the cluster
      const record = new HealthRecorder(agent.listening.url).start();
      await Promise.all(NAMES.map((n) => c.kill(n)));
      const killedAt = Date.now();

      // A hundred answers asked after the kill: the cluster stays dead for all of them.
      await eventually(() => record.answers.filter((a) => a.sentAt >= killedAt).length >= 100, { within: 60_000, every: 50 });
      const restartedAt = Date.now();
      const metrics = (await get(agent, '/metrics')).text;
      const seen = await record.stop();

      expectTruthful(seen, { down: NAMES, from: killedAt, to: restartedAt });
      // Every observation begun after the kill found no quorum (or none finished: unknown, no observedAt).
      const after = seen.filter((a) => a.sentAt >= killedAt && (a.observedAt === undefined || a.observedAt >= killedAt));
      expect(after.filter((a) => a.http !== 503 || !['unavailable', 'unknown'].includes(a.status ?? ''))).toEqual([]);
      // Nothing healthy at all after the first 503.
      const firstDown = seen.findIndex((a) => a.http === 503);
      expect(firstDown).toBeGreaterThanOrEqual(0);
      expect(seen.slice(firstDown).filter((a) => a.http === 200)).toEqual([]);
      expect(metrics).toMatch(/^etcd_agent_cluster_healthy 0$/m);
      // unavailable: no quorum, 0 healthy voters; unknown (no observation finished): no quorum gauges at all.
      const status = /^etcd_agent_cluster_status\{status="(\w+)"\} 1$/m.exec(metrics)?.[1];
      expect(['unavailable', 'unknown']).toContain(status);
      const quorumLines = metrics.split('\n').filter((l) => /^etcd_agent_quorum_(healthy_voters|has_quorum) /.test(l));
      expect(quorumLines).toEqual(status === 'unknown' ? [] : ['etcd_agent_quorum_healthy_voters 0', 'etcd_agent_quorum_has_quorum 0']);

      await Promise.all(NAMES.map((n) => c.restart(n)));
      const back = await waitFor('healthy', 20_000);
      expect(back.json.quorum).toMatchObject({ healthyVoters: 3, faultTolerance: 1 });
    },
  );
});

/**
 * The max age and the observations, judged from the record (docs/api.md §4): every answer with an
 * observation is at most the max age old, none observed while `down` were down says `healthy`, and
 * each of those that lists members shows every one of `down` unreachable. "While down" is an
 * observation begun after they went down (`from`) and answered before they came back (`to`): both
 * its start and all its calls fell inside the outage.
 */
function expectTruthful(answers: HealthAnswer[], outage: { down: string[]; from: number; to: number }): void {
  expect(answers.filter((a) => a.ageMs !== undefined && (a.ageMs < 0 || a.ageMs > MAX_AGE_MS))).toEqual([]);
  const whileDown = answers.filter((a) => a.observedAt !== undefined && a.observedAt >= outage.from && a.at <= outage.to);
  expect(whileDown.length).toBeGreaterThan(0);
  expect(whileDown.filter((a) => a.status === 'healthy')).toEqual([]);
  const heard = whileDown.filter((a) =>
    ((a.json?.members ?? []) as Array<{ name: string; reachable: boolean }>).some((m) => outage.down.includes(m.name) && m.reachable),
  );
  expect(heard).toEqual([]);
}

/** A member that is running and not the leader, by what etcd itself says. */
async function followerOf(c: LocalEtcdCluster): Promise<string> {
  const members = await c.listMembers();
  const out = await c.etcdctl(['endpoint', 'status', '-w', 'json']);
  const leader = /"leader":(\d+)/.exec(out)?.[1];
  if (leader === undefined) throw new Error(`no leader in ${out}`);
  const leaderId = BigInt(leader).toString(16);
  const follower = members.find((m) => m.id !== leaderId && m.name !== 'etcd-0');
  if (follower === undefined) throw new Error('no follower other than etcd-0');
  return follower.name;
}

/** The sum of one of the agent's counters over its labels. */
async function counter(agent: RunningAgent, name: 'statusRpcs' | 'healthObservations'): Promise<number> {
  const values = (await agent.metrics[name].get()).values;
  return values.reduce((sum, v) => sum + v.value, 0);
}
