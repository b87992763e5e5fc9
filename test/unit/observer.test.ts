/**
 * The observer's own mechanics (budgets, sharing, fallback, gauges) with a scripted cluster client.
 * What etcd actually answers is shown by test/integration/health.test.ts against real etcd.
 *
 * Time is the subject here (budgets, deadlines, max age), so it runs on jest's fake clock
 * (`setTimeout`, `performance.now()` and `Date` together): a deadline fires when the test moves the
 * clock, never because the machine was slow, and durations are measured on that clock.
 */
import { HealthObserver, HealthObserverDeps } from '../../agent/health/observer';
import { createLogger } from '../../agent/observability/logger';
import { createMetrics, Metrics } from '../../agent/observability/metrics';
import type { Member, MemberList, MemberStatus } from '../../agent/proto/types';

const members: Member[] = [0, 1, 2].map((n) => ({
  id: `a${n}`,
  name: `etcd-${n}`,
  peerURLs: [`http://10.0.0.${n}:2380`],
  clientURLs: [`http://10.0.0.${n}:2379`],
  isLearner: false,
  started: true,
}));

function statusOf(url: string): MemberStatus {
  const n = Number(/10\.0\.0\.(\d+)/.exec(url)?.[1]);
  return {
    memberId: `a${n}`,
    leaderId: 'a0',
    raftTerm: 2,
    raftIndex: 10,
    raftAppliedIndex: 10,
    dbSizeBytes: 20480,
    dbSizeInUseBytes: 16384,
    revision: 7,
    isLearner: false,
    version: '3.4.23',
    errors: [],
    latencyMs: 1,
  };
}

const never = <T>(): Promise<T> => new Promise<T>(() => undefined);

/** A cluster client whose answers the test scripts; `hang` lists URLs (or "list") that never answer. */
function scripted(hang: Set<string> = new Set()) {
  const calls = { status: 0, list: 0, listAt: 0, localList: 0 };
  const cluster: HealthObserverDeps['cluster'] = {
    listMembers: async (): Promise<MemberList> => {
      calls.list++;
      if (hang.has('list')) return never();
      if (hang.has('list-refused')) throw new Error('etcdserver: rpc not supported for learner');
      return { clusterId: 'c1', answeredBy: 'a0', raftTerm: 2, members };
    },
    memberListAt: async (url: string): Promise<MemberList> => {
      calls.listAt++;
      if (hang.has('list') || hang.has(url)) return never();
      return { clusterId: 'c1', answeredBy: statusOf(url).memberId, raftTerm: 2, members };
    },
    localMemberList: async (): Promise<MemberList> => {
      calls.localList++;
      if (hang.has('local-list')) return never();
      return { clusterId: 'c1', answeredBy: 'a0', raftTerm: 2, members };
    },
    memberStatus: async (url: string): Promise<MemberStatus> => {
      calls.status++;
      // Ignores its deadline on purpose: the observer must not depend on the client keeping it.
      if (hang.has(url)) return never();
      return statusOf(url);
    },
    alarms: async () => [],
  };
  return { cluster, calls, hang };
}

/**
 * Runs the fake clock until `answer` settles (every timer the observer set has fired or been
 * cleared); answers its value and how many milliseconds it took on that clock.
 */
async function timed<T>(answer: Promise<T>): Promise<{ value: T; ms: number }> {
  const from = performance.now();
  let ms = Number.NaN;
  const done = answer.then((value) => {
    ms = performance.now() - from;
    return value;
  });
  await jest.runAllTimersAsync();
  return { value: await done, ms };
}

/** Moves the fake clock past the max age (300 ms), so the last observation is too old to serve. */
const pastMaxAge = (): Promise<void> => jest.advanceTimersByTimeAsync(310);

function observer(cluster: HealthObserverDeps['cluster'], metrics: Metrics = createMetrics({ defaultMetrics: false })): HealthObserver {
  return new HealthObserver({
    cluster,
    metrics,
    logger: createLogger({ silent: true }),
    config: {
      endpoints: ['http://10.0.0.0:2379', 'http://10.0.0.2:2379'],
      localEndpoint: 'http://10.0.0.1:2379',
      memberName: 'etcd-1',
      healthMaxAgeMs: 300,
      statusTimeoutMs: 150,
    },
  });
}

describe('HealthObserver', () => {
  beforeEach(() => {
    // Promises still settle for real; only the clocks and timers are the test's.
    jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask'] });
  });

  afterEach(() => {
    jest.useRealTimers();
  });

  it('when every member answers, then the cluster is healthy and its age is within the max age', async () => {
    const { value: answer } = await timed(observer(scripted().cluster).cluster());

    expect(answer.health.status).toBe('healthy');
    expect(answer.ageMs).toBeLessThanOrEqual(300);
    expect(Date.parse(answer.observedAt ?? '')).toBeLessThanOrEqual(Date.now());
  });

  it('when one member never answers (not even at its deadline), then the answer is degraded within the max age, not unknown', async () => {
    const s = scripted(new Set(['http://10.0.0.2:2379']));
    const o = observer(s.cluster);
    await timed(o.cluster()); // learns the member list
    await pastMaxAge();

    const { value: answer, ms } = await timed(o.cluster());

    expect(answer.health.status).toBe('degraded');
    expect(answer.health.members[2]).toMatchObject({ reachable: false, errors: ['http://10.0.0.2:2379: no answer within 150 ms'] });
    expect(ms).toBeLessThan(300);
  });

  it('when no member answers at all, then it is unavailable within the max age', async () => {
    const s = scripted(new Set(members.map((m) => m.clientURLs[0])));

    const { value: answer, ms } = await timed(observer(s.cluster).cluster());

    expect(answer.health.status).toBe('unavailable');
    expect(answer.health.errors[0]).toBe('no endpoint answered');
    expect(ms).toBeLessThan(300);
  });

  it('when the member list stops answering, then the last one directs the status calls and the answer is at best degraded', async () => {
    const s = scripted();
    const o = observer(s.cluster);
    expect((await timed(o.cluster())).value.health.status).toBe('healthy');
    s.hang.add('list');
    await pastMaxAge();

    const { value: answer, ms } = await timed(o.cluster());

    expect(answer.health.status).toBe('degraded');
    expect(answer.health.quorum).toMatchObject({ healthyVoters: 3, hasQuorum: true });
    expect(answer.health.errors[0]).toMatch(/^member list: no answer within \d+ ms$/);
    expect(ms).toBeLessThan(300);
    // Counted by the list read before: no proof for the quorum gate while members answer.
    expect(o.quorumEvidence()?.evidence).toMatchObject({ voters: 3, answering: 3, listedBefore: true });
  });

  it('when the configured endpoints refuse the member list (a learner), then it is read at a voter that answered, and all is healthy', async () => {
    const s = scripted(new Set(['list-refused']));

    const { value: answer } = await timed(observer(s.cluster).cluster());

    expect(answer.health.status).toBe('healthy');
    expect(answer.health.errors).toEqual([]);
    expect(s.calls.listAt).toBe(1);
    expect(s.calls.status).toBe(3); // the two configured endpoints, then the one member they did not cover
  });

  it('when no member list was ever read and none can be, then it is unavailable within the max age, though voters answer', async () => {
    const s = scripted(new Set(['list', 'local-list']));

    const { value: answer, ms } = await timed(observer(s.cluster).cluster());

    expect(answer.health.status).toBe('unavailable');
    expect(answer.health.errors[0]).toBe('the member list could not be read, and none was read before');
    expect(s.calls.status).toBe(2); // only the configured endpoints: there is no list to direct more
    expect(ms).toBeLessThan(300);
  });

  it("when no member list was ever read and no quorum answers, then a member's own copy counts the voters: unavailable, 1 of 3 answering", async () => {
    const s = scripted(new Set(['list', 'http://10.0.0.1:2379', 'http://10.0.0.2:2379']));

    const { value: answer, ms } = await timed(observer(s.cluster).cluster());

    expect(answer.health.status).toBe('unavailable');
    expect(answer.health.quorum).toMatchObject({ voters: 3, required: 2, hasQuorum: false });
    expect(answer.health.members.map((m) => m.reachable)).toEqual([true, false, false]);
    expect(s.calls.localList).toBe(1);
    expect(ms).toBeLessThan(300);
  });

  it('when a member list was read before, then no own copy is asked for', async () => {
    const s = scripted();
    const o = observer(s.cluster);
    await timed(o.cluster());
    s.hang.add('list');
    await pastMaxAge();

    await timed(o.cluster());

    expect(s.calls.localList).toBe(1); // the first observation's, beside its list read
  });

  it('when members were added and removed since the last list and the list then waits (a leader killed), then a voter that answers gives its own copy, and the voters are counted by it', async () => {
    const s = scripted();
    const joined = [3, 4].map((n) => ({ ...members[0], id: `a${n}`, name: `etcd-${n}`, clientURLs: [`http://10.0.0.${n}:2379`] }));
    let current = members;
    const down = new Set<string>();
    const cluster = {
      ...s.cluster,
      listMembers: async (): Promise<MemberList> =>
        down.size > 0 ? never() : { clusterId: 'c1', answeredBy: 'a0', raftTerm: 2, members: current },
      memberListAt: async (url: string): Promise<MemberList> => ({
        clusterId: 'c1',
        answeredBy: statusOf(url).memberId,
        raftTerm: 3,
        members: current,
      }),
      memberStatus: async (url: string, ms: number): Promise<MemberStatus> => {
        if (down.has(url)) throw new Error('14 UNAVAILABLE: No connection established. Last error: connect ECONNREFUSED');
        return s.cluster.memberStatus(url, ms);
      },
    };
    const o = observer(cluster);
    expect((await timed(o.cluster())).value.health.quorum).toMatchObject({ voters: 3, healthyVoters: 3 });
    // etcd-3 and etcd-4 joined, etcd-1 left and was killed, then the leader etcd-0 was killed.
    current = [members[0], members[2], ...joined];
    ['http://10.0.0.0:2379', 'http://10.0.0.1:2379'].forEach((url) => down.add(url));
    await pastMaxAge();

    const { value: answer } = await timed(o.cluster());

    expect(answer.health.quorum).toMatchObject({ voters: 4, healthyVoters: 3, required: 3, hasQuorum: true });
    expect(o.quorumEvidence()?.evidence).toMatchObject({ voters: 4, answering: 3, listedBefore: false });
  });

  it('when 300 callers ask at once, then one observation makes one status call per member', async () => {
    const s = scripted();
    const o = observer(s.cluster);

    const { value: answers } = await timed(Promise.all(Array.from({ length: 300 }, () => o.cluster())));

    expect(new Set(answers.map((a) => a.health.status))).toEqual(new Set(['healthy']));
    expect(s.calls).toEqual({ status: 3, list: 1, listAt: 0, localList: 1 });
  });

  it('when /metrics is scraped, then the health gauges come from a fresh observation and the age is computed then', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const s = scripted();
    const o = observer(s.cluster, metrics);

    const { value: text } = await timed(metrics.registry.metrics());

    expect(text).toMatch(/^etcd_agent_cluster_healthy 1$/m);
    expect(text).toMatch(/^etcd_agent_quorum_healthy_voters 3$/m);
    expect(text).toMatch(/^etcd_agent_quorum_voters 3$/m);
    expect(text).toMatch(/^etcd_agent_member_reachable\{member="etcd-2"\} 1$/m);
    const age = Number(/^etcd_agent_health_observation_age_seconds (\S+)$/m.exec(text)?.[1]);
    expect(age).toBeGreaterThanOrEqual(0);
    expect(age).toBeLessThanOrEqual(0.3);
    expect(s.calls.status).toBe(3); // five gauges, one observation

    s.hang.add('http://10.0.0.1:2379');
    s.hang.add('http://10.0.0.2:2379');
    await pastMaxAge();
    const { value: later } = await timed(metrics.registry.metrics());

    expect(later).toMatch(/^etcd_agent_cluster_healthy 0$/m);
    expect(later).toMatch(/^etcd_agent_quorum_healthy_voters 1$/m);
    expect(later).toMatch(/^etcd_agent_member_reachable\{member="etcd-2"\} 0$/m);
    o.close();
  });

  it('when the agent is too slow to finish an observation within the max age, then /metrics says unknown and has no quorum gauges', async () => {
    // The subject here is a starved event loop, which only real time can show: a busy loop on the
    // fake clock would never end.
    jest.useRealTimers();
    const metrics = createMetrics({ defaultMetrics: false });
    const s = scripted();
    const o = observer(s.cluster, metrics);
    expect(await metrics.registry.metrics()).toMatch(/^etcd_agent_quorum_voters 3$/m);

    // A starved event loop, the real cause of `unknown`: one status call blocks it past the max age.
    const answer = s.cluster.memberStatus;
    let blocked = false;
    s.cluster.memberStatus = (url, ms) => {
      if (!blocked) {
        blocked = true;
        const until = performance.now() + 350;
        while (performance.now() < until) {
          // busy: nothing else runs
        }
      }
      return answer(url, ms);
    };
    await new Promise((resolve) => setTimeout(resolve, 310));
    const text = await metrics.registry.metrics();

    expect(blocked).toBe(true);
    expect(text).toMatch(/^etcd_agent_cluster_status\{status="unknown"\} 1$/m);
    expect(text).toMatch(/^etcd_agent_cluster_status\{status="healthy"\} 0$/m);
    expect(text).toMatch(/^etcd_agent_cluster_healthy 0$/m);
    expect(text.split('\n').filter((line) => /^etcd_agent_(quorum|cluster_members|cluster_learners|member_reachable)/.test(line))).toEqual(
      [],
    );

    // Once the loop runs freely again, a scrape gets a healthy observation (polled: the machine's
    // own load may starve the loop again for a while).
    let later = '';
    for (const until = Date.now() + 5000; Date.now() < until;) {
      await new Promise((resolve) => setTimeout(resolve, 310));
      later = await metrics.registry.metrics();
      if (/^etcd_agent_cluster_status\{status="healthy"\} 1$/m.test(later)) break;
    }
    expect(later).toMatch(/^etcd_agent_cluster_status\{status="healthy"\} 1$/m);
    expect(later).toMatch(/^etcd_agent_quorum_fault_tolerance 1$/m);
    expect(later).toMatch(/^etcd_agent_quorum_has_quorum 1$/m);
    o.close();
  });

  it('when the local endpoint answers as a listed follower, then /v1/health/local is ready with role follower', async () => {
    const { value: answer } = await timed(observer(scripted().cluster).local());

    expect(answer.local.ready).toBe(true);
    expect(answer.local.member).toMatchObject({ name: 'etcd-1', role: 'follower', reachable: true });
  });

  it('when the role is asked twice within the max age, then the second answer comes from the same observations, with no etcd call', async () => {
    const s = scripted();
    const o = observer(s.cluster);
    expect((await timed(o.role())).value.reading).toEqual({ kind: 'role', role: 'follower' });
    const calls = { ...s.calls };

    expect((await timed(o.role())).value.reading).toEqual({ kind: 'role', role: 'follower' });

    expect(s.calls).toEqual(calls);
  });

  it("when a reading has no role (this pod's etcd missed its budget), then observations begun after it confirm it once, and their role is the answer", async () => {
    const s = scripted(new Set(['http://10.0.0.1:2379']));
    const o = observer(s.cluster);
    const first = o.role();
    // The local etcd answers again after the first observation asked it, before the confirmation does.
    setTimeout(() => s.hang.delete('http://10.0.0.1:2379'), 100);

    const { value, ms } = await timed(first);

    expect(value.reading).toEqual({ kind: 'role', role: 'follower' });
    expect(ms).toBeLessThan(2 * 300);
  });

  it('when readings keep having no role, then they are confirmed at most once per max age (the load follows time, not the probe rate)', async () => {
    const s = scripted(new Set(['http://10.0.0.1:2379']));
    const o = observer(s.cluster);
    const asked: Array<Promise<{ reading: { kind: string } }>> = [];
    const started = performance.now();

    // A probe every 10 ms for 400 ms.
    for (let i = 0; i < 40; i++) {
      asked.push(o.role());
      await jest.advanceTimersByTimeAsync(10);
    }
    const answers = await timed(Promise.all(asked));

    expect(new Set(answers.value.map((a) => a.reading.kind))).toEqual(new Set(['not-answering']));
    // One cluster observation per max age for the probes, and at most one more per max age to
    // confirm: not one per probe.
    const windows = Math.ceil((performance.now() - started) / 300);
    expect(s.calls.list).toBeLessThanOrEqual(2 * windows + 1);
    expect(s.calls.list).toBeLessThan(40 / 2);
  });

  it("when 2 of 3 voters give no answer by their deadline, then the quorum gate's evidence counts them silent because their time ran out, and names them", async () => {
    const s = scripted(new Set(['http://10.0.0.1:2379', 'http://10.0.0.2:2379']));
    const o = observer(s.cluster);
    await timed(o.cluster());

    const seen = o.quorumEvidence();

    expect(seen?.evidence).toEqual({ voters: 3, answering: 1, outOfTime: 2, leader: false, listedBefore: false });
    expect(seen?.silent.map((v) => v.member)).toEqual(['etcd-1', 'etcd-2']);
    expect(seen?.silent[0].error).toMatch(/no answer within \d+ ms/);
  });

  it("when 2 of 3 voters refuse their Status call (killed), then the quorum gate's evidence counts them silent with none out of time", async () => {
    const s = scripted();
    const refused = new Set(['http://10.0.0.1:2379', 'http://10.0.0.2:2379']);
    const cluster = {
      ...s.cluster,
      memberStatus: async (url: string, ms: number): Promise<MemberStatus> => {
        if (refused.has(url)) throw new Error('14 UNAVAILABLE: No connection established. Last error: connect ECONNREFUSED');
        return s.cluster.memberStatus(url, ms);
      },
    };
    const o = observer(cluster);
    await timed(o.cluster());

    const seen = o.quorumEvidence();

    expect(seen?.evidence).toEqual({ voters: 3, answering: 1, outOfTime: 0, leader: false, listedBefore: false });
    expect(seen?.silent.map((v) => v.error)).toEqual([
      expect.stringContaining('http://10.0.0.1:2379: '),
      expect.stringContaining('http://10.0.0.2:2379: '),
    ]);
  });
});
