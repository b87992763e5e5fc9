/**
 * Fault injection against a real 3-member etcd: N joins and leaves of a 4th
 * member through the built agent (the bin `dist/bin/etcd-lifecycle-agent.js serve`, a child
 * process), each with faults at seeded random moments:
 * - the agent SIGKILLed while the call runs, then started again;
 * - on some joins, etcd's leader SIGKILLed mid-join (restarted afterwards, as its pod would be);
 * - on some leaves, another member frozen (SIGSTOP) mid-leave, continued a little later.
 * After each, the same call repeated must converge; after each and at the end:
 * no duplicate member, none missing, and all along the cluster never lost
 * quorum where our own faults do not explain it. That is judged from records,
 * not from a bound on how long: every member list read shows enough started
 * voters outside the faults for a quorum; every election etcd logged
 * (helpers/raft-record.ts) ended; every stretch in which more voters refused
 * /health than a quorum can spare overlaps a fault or an election.
 *
 * etcd runs with --pre-vote=true, as etcd 3.5+ does by default (the versions KubeBlocks deploys). With
 * 3.4's default (off), a leader frozen mid-leave whose last entries reached only one follower leaves
 * the 4 voters unable to elect for seconds after it continues: the members that missed those entries
 * keep campaigning, cannot win (3 votes needed, the others refuse their shorter log), and each
 * attempt raises the term and restarts everyone's election timer. That is etcd 3.4's election, not
 * the agent (which waits for a leader to remove the member).
 *
 * FAULT_ITERATIONS (default 12, the CI form) and FAULT_SEED (default 7) choose the
 * run; `FAULT_ITERATIONS=50` is the long form. It prints "N passed, M failed".
 */
import fs from 'node:fs';
import { ChildAgent, MAIN_JS as main } from '../helpers/child-agent';
import { ListedMember, MemberSpec, withCluster } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';
import type { Answer } from '../helpers/http-call';
import { etcdAcceptsChanges, leaderOf, post } from '../helpers/membership';
import { prng } from '../helpers/prng';
import { QuorumWatch, VoterHealth } from '../helpers/quorum-watch';
import { changedLeadership, RaftRecord } from '../helpers/raft-record';
import { firstVersionOfRun } from '../helpers/version-scope';

// Twelve on the run's first etcd version; six on the others, which still hold a leader killed
// mid-join and a member frozen mid-leave (seed 7: iterations 1, 4 and 5) beside the agent's kills.
const ITERATIONS = Number(process.env.FAULT_ITERATIONS ?? (firstVersionOfRun ? 12 : 6));
const SEED = Number(process.env.FAULT_SEED ?? 7);
const CORE = ['etcd-0', 'etcd-1', 'etcd-2'];
const JOIN = '/v1/members/join';
const LEAVE = '/v1/members/leave';
/** Longest an iteration may take to converge, faults included: a patience (TEST_TIME_SCALE lengthens it). */
const ITERATION_BOUND_MS = 60_000;

/** A fault in effect: a core member killed or frozen, from when it was done until it was undone. */
interface Fault {
  what: string;
  member: string;
  from: number;
  to?: number;
}

/** Whether [from, to] meets a fault (one not undone lasts until now). */
const meetsFault = (faults: Fault[], from: number, to: number): boolean => faults.some((f) => f.from <= to && (f.to ?? Infinity) >= from);

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** An answer, or why there was none (the agent died under the call). */
type Outcome = { answer: Answer } | { failed: string };

function attempt(p: Promise<Answer>): Promise<Outcome> {
  return p.then(
    (answer) => ({ answer }),
    (err: Error) => ({ failed: err.message }),
  );
}

function describeOutcome(o: Outcome): string {
  if ('failed' in o) return `no answer (${o.failed})`;
  const { outcome, phase, error } = o.answer.json ?? {};
  if (outcome === 'in-progress') return `in-progress (${phase})`;
  return outcome ?? `${o.answer.status} ${error?.code ?? ''}`.trim();
}

describe('fault injection: agent SIGKILLs, a killed leader, a frozen member (real etcd, built agent)', () => {
  const cluster = withCluster(3, { extraArgs: ['--pre-vote=true'] });
  let agent: ChildAgent | undefined;
  let spec: MemberSpec;
  let watch: QuorumWatch;
  let killedMidCall = 0;
  const faults: Fault[] = [];
  const raft = RaftRecord.ofFiles(() => cluster().members, CORE.length);

  const startPodAgent = async (): Promise<ChildAgent> => {
    agent = await ChildAgent.start(main, {
      ETCD_AGENT_MEMBER_NAME: 'etcd-0',
      ETCD_AGENT_ENDPOINTS: CORE.map((n) => cluster().member(n).clientURL).join(','),
      ETCD_AGENT_LOCAL_ENDPOINT: cluster().member('etcd-0').clientURL,
      ETCD_AGENT_LOG_LEVEL: 'info',
    });
    return agent;
  };

  /** Notes a fault done to `member` (and in the watch's story); answers the function that notes it undone. */
  const fault = (what: string, member: string): (() => void) => {
    const f: Fault = { what, member, from: Date.now() };
    faults.push(f);
    watch.note(`${member} ${what}`);
    return () => {
      f.to = Date.now();
      watch.note(`${member} ${what}: undone`);
    };
  };

  beforeAll(async () => {
    spec = await cluster().reserveMember('etcd-3');
    await startPodAgent();
    watch = new QuorumWatch({
      // Voters as the core members list them: etcd-3 may be leaving, and etcd 3.4 answers the list from the asked
      // member's own copy, which a member being removed can still hold when the others have applied its removal.
      list: () => members(),
      health: async (name, timeoutMs): Promise<VoterHealth> => {
        const { verdict } = await cluster().healthCheck(name, timeoutMs);
        return verdict === 'ok' ? 'ok' : verdict === 'unhealthy' || verdict === 'refused' ? 'down' : 'unknown';
      },
      required: () => CORE.map((name) => cluster().member(name)),
    });
    watch.start();
    // etcd refuses any member add until its peers have been connected for 5 s.
    await etcdAcceptsChanges(cluster());
  }, patience(180_000));

  afterAll(async () => {
    await watch?.stop();
    await agent?.kill('SIGKILL');
  });

  /** The member list from the running core members, etcd-3 excluded (it may be leaving). */
  const members = (): Promise<ListedMember[]> =>
    cluster().listMembers(
      cluster()
        .members.filter((m) => CORE.includes(m.name) && m.state === 'running')
        .map((m) => m.clientURL),
    );

  /** Repeats `call` (a fresh agent each time one dies) until `done` accepts an answer; answers the trail of outcomes. */
  async function converge(path: string, body: object, done: (a: Answer) => boolean, until: number): Promise<string[]> {
    const trail: string[] = [];
    for (;;) {
      if (agent === undefined) await startPodAgent();
      const outcome = await attempt(post((agent as ChildAgent).url, path, body, 30_000));
      trail.push(describeOutcome(outcome));
      if ('answer' in outcome && done(outcome.answer)) return trail;
      if ('answer' in outcome && outcome.answer.status < 500 && outcome.answer.status !== 409 && outcome.answer.status !== 202) {
        throw new Error(`${path} answered ${outcome.answer.status}: ${outcome.answer.text.slice(0, 300)}`);
      }
      if (Date.now() > until) throw new Error(`${path} did not converge: ${trail.join(' → ')}${await diagnose()}`);
      await sleep(400);
    }
  }

  /** What the cluster looks like, for a failure message: processes, member list, the tail of etcd-3's log. */
  async function diagnose(): Promise<string> {
    const processes = cluster()
      .members.map((m) => `${m.name}:${m.state}`)
      .join(' ');
    const list = await cluster()
      .listMembers(
        cluster()
          .members.filter((m) => m.state === 'running')
          .map((m) => m.clientURL),
      )
      .catch((e: Error) => e.message);
    const fourth = cluster().members.find((m) => m.name === 'etcd-3');
    let tail = '';
    try {
      tail = fs
        .readFileSync(fourth?.logFile ?? '', 'utf8')
        .trimEnd()
        .split('\n')
        .slice(-8)
        .join('\n');
    } catch {
      // no log yet
    }
    return `\n  processes: ${processes}\n  members: ${JSON.stringify(list)}\n  etcd-3 log tail:\n${tail}`;
  }

  /** After each iteration: etcd-0..2 started voters, no duplicate name or peer URL, etcd-3 there exactly when it should be. */
  async function expectMembership(shouldHaveEtcd3: boolean): Promise<void> {
    const list = await members();
    const peerURLs = list.flatMap((m) => m.peerURLs);
    const names = list.filter((m) => m.started).map((m) => m.name);
    if (new Set(peerURLs).size !== peerURLs.length) throw new Error(`duplicate peer URL: ${peerURLs.join(', ')}`);
    if (new Set(names).size !== names.length) throw new Error(`duplicate name: ${names.join(', ')}`);
    for (const name of CORE) {
      const m = list.find((x) => x.name === name);
      if (m === undefined || m.isLearner) throw new Error(`${name} is missing or not a voter: ${JSON.stringify(list)}`);
    }
    const fourth = list.filter((m) => m.peerURLs.includes(spec.peerURL) || m.name === 'etcd-3');
    if (shouldHaveEtcd3 && !(fourth.length === 1 && fourth[0].name === 'etcd-3' && fourth[0].started && !fourth[0].isLearner)) {
      throw new Error(`etcd-3 should be one started voter: ${JSON.stringify(fourth)}`);
    }
    if (!shouldHaveEtcd3 && fourth.length !== 0) throw new Error(`etcd-3 should be gone: ${JSON.stringify(fourth)}`);
    if (list.length !== (shouldHaveEtcd3 ? 4 : 3)) throw new Error(`expected ${shouldHaveEtcd3 ? 4 : 3} members, found ${list.length}`);
  }

  /** Puts every process back (continue the frozen, start the killed, an agent running) after a failed iteration. */
  async function repair(): Promise<void> {
    for (const m of cluster().members) {
      if (m.state === 'paused') cluster().resume(m.name);
      if (m.state === 'stopped' && CORE.includes(m.name))
        await cluster()
          .restart(m.name)
          .catch(() => undefined);
    }
    if (agent === undefined) await startPodAgent().catch(() => undefined);
  }

  async function killAgentAt(ms: number): Promise<void> {
    await sleep(ms);
    const dying = agent;
    agent = undefined;
    watch.note('agent killed');
    await dying?.kill('SIGKILL');
  }

  async function join(random: () => number): Promise<string> {
    const body = { name: 'etcd-3', peerURLs: [spec.peerURL], timeoutSeconds: 10 };
    // Within the span of a join's first call (lock, record, MemberAdd), so that some kills land inside it.
    const killAgentAfter = Math.floor(random() * 200);
    const leader = random() < 0.5 ? (await leaderOf(cluster())).name : undefined;
    const killLeaderAfter = Math.floor(random() * 200);
    const until = Date.now() + patience(ITERATION_BOUND_MS);
    let restarted = (): void => undefined;

    const first = attempt(post((agent as ChildAgent).url, JOIN, body, 30_000));
    await Promise.all([
      killAgentAt(killAgentAfter),
      leader === undefined
        ? Promise.resolve()
        : sleep(killLeaderAfter).then(() => {
            restarted = fault('(leader) killed', leader);
            return cluster().kill(leader);
          }),
    ]);
    const firstSaid = describeOutcome(await first);
    if (firstSaid.startsWith('no answer')) killedMidCall += 1;
    // The killed leader's pod comes back, as Kubernetes would restart it.
    if (leader !== undefined) {
      await cluster().restart(leader);
      restarted();
    }

    // Same call until etcd-3 is a member; then its etcd starts; then the same call (waiting) until it is a voter.
    const added = await converge(JOIN, body, (a) => a.status === 200 || a.status === 202, until);
    if (cluster().members.find((m) => m.name === 'etcd-3')?.state !== 'running')
      await cluster().addMemberProcess('etcd-3', { wait: false });
    const voter = await converge(JOIN, { ...body, wait: true }, (a) => a.status === 200, until);
    await expectMembership(true);
    return `agent killed at ${killAgentAfter} ms${leader ? `, leader ${leader} killed at ${killLeaderAfter} ms` : ''}; first: ${firstSaid}; then ${[...added, ...voter].join(' → ')}`;
  }

  async function leave(random: () => number): Promise<string> {
    const body = { name: 'etcd-3', peerURLs: [spec.peerURL], timeoutSeconds: 10 };
    // A leave's first call is shorter than a join's: kill and freeze inside that span.
    const killAgentAfter = Math.floor(random() * 80);
    const frozen = random() < 0.5 ? (random() < 0.5 ? 'etcd-1' : 'etcd-2') : undefined;
    const freezeAfter = Math.floor(random() * 40);
    const freezeFor = 500 + Math.floor(random() * 1500);
    const until = Date.now() + patience(ITERATION_BOUND_MS);

    const first = attempt(post((agent as ChildAgent).url, LEAVE, body, 30_000));
    const thaw =
      frozen === undefined
        ? Promise.resolve()
        : sleep(freezeAfter).then(async () => {
            const continued = fault('frozen', frozen);
            cluster().pause(frozen);
            await sleep(freezeFor);
            cluster().resume(frozen);
            continued();
          });
    await killAgentAt(killAgentAfter);
    const firstSaid = describeOutcome(await first);
    if (firstSaid.startsWith('no answer')) killedMidCall += 1;

    const trail = await converge(LEAVE, body, (a) => a.status === 200, until);
    await thaw;
    // A removed member stops by itself; make sure its process is gone before the next join.
    await cluster().kill('etcd-3');
    watch.note('etcd-3 (removed) killed');
    await expectMembership(false);
    return `agent killed at ${killAgentAfter} ms${frozen ? `, ${frozen} frozen at ${freezeAfter} ms for ${freezeFor} ms` : ''}; first: ${firstSaid}; then ${trail.join(' → ')}`;
  }

  it(
    `when the agent is SIGKILLed at seeded random points of ${ITERATIONS} joins and leaves (seed ${SEED}), with a leader killed mid-join and a member frozen mid-leave, then every call converges and membership stays exact`,
    async () => {
      const watchedFrom = Date.now();
      const random = prng(SEED);
      let passed = 0;
      let failed = 0;
      const started = Date.now();
      for (let i = 1; i <= ITERATIONS; i++) {
        const present = (await members()).some((m) => m.peerURLs.includes(spec.peerURL));
        const kind = present ? 'leave' : 'join';
        const t0 = Date.now();
        watch.note(`iteration ${i} (${kind}) starts`);
        try {
          const story = kind === 'join' ? await join(random) : await leave(random);
          passed += 1;
          process.stdout.write(`fault ${i}/${ITERATIONS} ${kind} ok in ${Date.now() - t0} ms: ${story}\n`);
        } catch (err) {
          failed += 1;
          process.stdout.write(`fault ${i}/${ITERATIONS} ${kind} FAILED after ${Date.now() - t0} ms: ${(err as Error).message}\n`);
          await repair();
        }
      }
      await watch.stop();
      // Every election etcd logged ended: the cluster was never left without a leader it could elect
      // (a membership change that broke the quorum would leave one open). Elections themselves are
      // etcd's: a killed or frozen leader makes one, and so does a leader this machine starves of CPU.
      await eventually(() => raft.elections().every((e) => e.to !== undefined), { within: 30_000, every: 200 });
      const elections = raft.elections().filter((e) => e.from >= watchedFrom && changedLeadership(e));
      const duringFaults = elections.filter((e) => meetsFault(faults, e.from, e.to ?? Infinity)).length;
      process.stdout.write(
        `fault injection: seed ${SEED}, ${Date.now() - started} ms, agent killed before answering in ${killedMidCall} of ${ITERATIONS}, ` +
          `${watch.samples} quorum samples, ${watch.stretches.length} stretches without quorum (longest ${watch.longestGapMs} ms), ` +
          `${elections.length} elections (${duringFaults} during a fault), ${faults.length} faults\n`,
      );
      process.stdout.write(`\n${passed} passed, ${failed} failed\n`);

      expect(failed).toBe(0);
      expect(watch.problems).toEqual([]);
      // The agent never left the voters short of a quorum: in every member list read, the started voters
      // that no fault had taken down were a quorum of the voters.
      const short = watch.lists.filter(({ at, members: list }) => {
        const voters = list.filter((m) => !m.isLearner);
        const down = new Set(faults.filter((f) => f.from <= at && (f.to ?? Infinity) >= at).map((f) => f.member));
        const up = voters.filter((m) => m.started && !down.has(m.name));
        return up.length < Math.floor(voters.length / 2) + 1;
      });
      expect(short.map((l) => `${new Date(l.at).toISOString()} ${JSON.stringify(l.members)}`)).toEqual([]);
      // Every stretch in which more voters refused /health than a quorum can spare overlaps a fault or an election.
      const stray = watch.stretches.filter(
        (g) => !meetsFault(faults, g.from, g.to) && !elections.some((e) => e.from <= g.to && (e.to ?? Infinity) >= g.from),
      );
      expect(stray.map((g) => watch.describe(g))).toEqual([]);
    },
    patience(60_000 + ITERATIONS * ITERATION_BOUND_MS),
  );
});
