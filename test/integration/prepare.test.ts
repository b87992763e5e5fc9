/**
 * `prepare` against real etcd processes standing in for a StatefulSet's pods
 * (test/helpers/prepare-pods.ts): first bootstrap, a restart with data,
 * scale-out, a lost disk, a removed member's old data, prepare killed at each
 * step, and all members down. A writer runs through the scale-out and the lost
 * disk; every acknowledged write must survive, and every member must report
 * the one cluster id the bootstrap made.
 */
import fs from 'node:fs';
import path from 'node:path';
import { delay, Deadline } from '../../agent/lib/deadline';
import type { Etcd3 } from 'etcd3';
import { EtcdCluster } from '../../agent/etcd/cluster-client';
import { etcd3 } from '../../agent/etcd/etcd3-module';
import { readDataDir } from '../../agent/etcd-data/data-dir';
import type { Member, MemberList } from '../../agent/proto/types';
import { eventually, patience } from '../helpers/eventually';
import { call } from '../helpers/http-call';
import { PodSet, PrepareRun } from '../helpers/prepare-pods';
import { itOnFirstVersion } from '../helpers/version-scope';

jest.setTimeout(patience(120_000));

const INITIAL = ['etcd-0', 'etcd-1', 'etcd-2'];
const ALL = [...INITIAL, 'etcd-3', 'etcd-4'];

let pods: PodSet;
let client: EtcdCluster;
let clusterId = '';

beforeAll(async () => {
  pods = await PodSet.create(5, 3);
  client = new EtcdCluster({ endpoints: pods.endpoints() });
});

afterAll(async () => {
  client?.close();
  await pods?.destroy();
});

const decided = (run: PrepareRun): Record<string, unknown> | undefined => run.lines.find((l) => l.message === 'prepared');
const stepsOf = (runs: PrepareRun[]): unknown[] =>
  runs.flatMap((r) => r.lines.filter((l) => l.message === 'prepare step').map((l) => l.step));

function members(): Promise<MemberList> {
  return client.listMembers(Deadline.in(5000));
}

/** The members whose peer URL is pod `name`'s: never more than one. */
async function membersOf(name: string): Promise<Member[]> {
  const url = pods.pod(name).peerURL;
  return (await members()).members.filter((m) => m.peerURLs.includes(url));
}

function walMember(name: string): string | undefined {
  const state = readDataDir(pods.pod(name).dataDir);
  return state.kind === 'member' ? state.memberId : undefined;
}

/**
 * Starts the pod's etcd and its sidecar together, as a pod's containers start, then waits for its etcd
 * to serve. The sidecar must not wait for that: a joined member that caught up from a snapshot on a
 * cluster nothing writes to serves only once its agent has written through the quorum (apply-nudge.ts).
 */
async function startPod(name: string): Promise<void> {
  pods.startEtcd(name);
  await pods.startAgent(name);
  await eventually(async () => expect(await pods.healthy(name)).toBe(true), { within: 20_000, every: 100 });
}

async function stopPod(name: string, kill = false): Promise<void> {
  await pods.stopAgent(name);
  await pods.stopEtcd(name, kill);
}

/** Waits until the cluster has exactly `names` as started voters and no learner. */
async function votersAre(names: string[], timeoutMs = 30_000): Promise<void> {
  await eventually(
    async () => {
      const list = await members();
      expect(list.members.map((m) => `${m.name}${m.isLearner ? ' (learner)' : ''}`).sort()).toEqual([...names].sort());
    },
    { within: timeoutMs, every: 200 },
  );
}

async function expectOneCluster(names: string[]): Promise<void> {
  const ids = await pods.clusterIds(names);
  expect(new Set(Object.values(ids))).toEqual(new Set([clusterId]));
}

/** Puts w/0, w/1, … one after another through the initial members, remembering what was acknowledged. */
class Writer {
  readonly acked: string[] = [];
  failures = 0;
  private running = true;
  private readonly done: Promise<void>;
  private readonly etcd: Etcd3;
  private firstAck?: () => void;
  /**
   * Resolves at the first acknowledged put: a new etcd3 client's first call may wait out a whole
   * 2 s deadline on its name resolution, and a disruption begun before then could leave the writer
   * too few acknowledged puts to check.
   */
  readonly ready = new Promise<void>((resolve) => (this.firstAck = resolve));

  /**
   * Writes through `through` only (pods whose etcd stays up: a put to a dead endpoint would wait for
   * its deadline), as a workload's own etcd client does: not the agent's cluster client, which also
   * tries the members the cluster reports (a stopped one among them).
   */
  constructor(through: string[]) {
    this.etcd = new (etcd3().Etcd3)({ hosts: through.map((n) => pods.pod(n).clientURL) });
    this.done = this.loop();
  }

  private async loop(): Promise<void> {
    for (let i = 0; this.running; i++) {
      const key = `w/${String(i).padStart(6, '0')}`;
      try {
        await this.etcd
          .put(key)
          .value(String(i))
          .options({ deadline: new Date(Date.now() + 2000) });
        this.acked.push(key);
        this.firstAck?.();
      } catch {
        this.failures++;
        await delay(50);
      }
    }
  }

  /**
   * Stops writing once at least 21 puts were acknowledged (it waits for them: the check needs a count
   * of writes, not a rate of them), and checks that every acknowledged key reads back.
   */
  async stopAndVerify(): Promise<void> {
    await eventually(async () => expect(this.acked.length).toBeGreaterThan(20), { within: 20_000, every: 50 });
    this.running = false;
    await this.done;
    expect(this.acked.length).toBeGreaterThan(20);
    const read = await this.etcd.getAll().prefix('w/').strings();
    const missing = this.acked.filter((k) => read[k] === undefined);
    expect(missing).toEqual([]);
    this.etcd.close();
  }
}

describe('prepare', () => {
  it('when three new pods start together and one prepare is killed after deciding, then each decides new once the others report empty data, and one cluster forms', async () => {
    // Each pod starts its etcd as soon as its own prepare exits 0, as the kubelet does.
    const started = async (name: string, run: PrepareRun): Promise<PrepareRun> => {
      if (run.code === 0) pods.startEtcd(name);
      return run;
    };
    // Killed right after it wrote its flags (a crash point: a kill sent on its last log line could
    // land after it exited).
    const killing = pods.prepare('etcd-0', { crashAt: 'prepare-flags-written' });
    const others = Promise.all(['etcd-1', 'etcd-2'].map(async (n) => started(n, await pods.prepare(n))));
    expect((await killing).signal).toBe('SIGKILL');
    // The re-run finds its own marker in the still-empty data directory and bootstraps the same cluster
    // again, or, when the other two have formed a quorum by then, finds itself listed and never run.
    const again = await started('etcd-0', await pods.prepare('etcd-0'));
    for (const run of await others) {
      expect(run.code).toBe(0);
      expect(decided(run)).toMatchObject({ state: 'new', initialCluster: pods.initialCluster });
    }
    expect(again.code).toBe(0);
    expect(decided(again)).toMatchObject({ state: expect.stringMatching(/^(new|existing)$/) });
    if (decided(again)?.state === 'new') expect(decided(again)?.initialCluster).toBe(pods.initialCluster);
    await Promise.all(INITIAL.map((n) => eventually(async () => expect(await pods.healthy(n)).toBe(true), { within: 20_000, every: 100 })));
    await Promise.all(INITIAL.map((n) => pods.startAgent(n)));
    clusterId = (await members()).clusterId;
    await expectOneCluster(INITIAL);
    await votersAre(INITIAL);
  });

  it('when a pod restarts with its data, then prepare starts it as is, with the same member', async () => {
    const before = walMember('etcd-1');
    await stopPod('etcd-1');
    const run = await pods.prepare('etcd-1');
    expect(run.code).toBe(0);
    expect(decided(run)).toMatchObject({ state: 'existing' });
    expect(String(decided(run)?.reason)).toContain('start as is');
    expect(stepsOf([run])).toEqual([]);
    await startPod('etcd-1');
    expect(walMember('etcd-1')).toBe(before);
    await votersAre(INITIAL);
  });

  it('when the StatefulSet scales 3 → 5 while a writer writes, then each new pod joins as a learner, one at a time, is promoted, and no write is lost', async () => {
    const writer = new Writer(INITIAL);
    await writer.ready;
    let maxLearners = 0;
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const list = await members().catch(() => undefined);
        if (list !== undefined) maxLearners = Math.max(maxLearners, list.members.filter((m) => m.isLearner || !m.started).length);
        await delay(100);
      }
    })();
    const runs = await Promise.all(
      ['etcd-3', 'etcd-4'].map(async (name) => {
        const r = await pods.prepareUntilReady(name, { endpoints: 5 });
        await startPod(name);
        return r;
      }),
    );
    await votersAre(ALL);
    watching = false;
    await watch;
    await writer.stopAndVerify();
    for (const r of runs) {
      expect(stepsOf(r)).toContain('join');
      const joined = r.flatMap((run) => run.lines.filter((l) => l.message === 'joined' && l.outcome === 'added'));
      expect(joined).toEqual([expect.objectContaining({ isLearner: true })]);
      expect(decided(r[r.length - 1])).toMatchObject({ state: 'existing' });
    }
    // Learners one at a time: the second new pod waited (its join refused as busy) until the first was promoted.
    expect(maxLearners).toBeLessThanOrEqual(1);
    for (const name of ALL) expect(await membersOf(name)).toHaveLength(1);
    await expectOneCluster(ALL);
  });

  // The same member calls as the scale-out above (remove, add a learner, promote), with a writer: on the
  // run's first version (version-scope.ts).
  itOnFirstVersion(
    'when a voter loses its disk while a writer writes, then prepare removes and re-adds it as a learner, and no write is lost',
    async () => {
      const writer = new Writer(['etcd-0', 'etcd-1']);
      await writer.ready;
      const before = (await membersOf('etcd-2'))[0].id;
      await stopPod('etcd-2', true);
      fs.rmSync(pods.pod('etcd-2').dataDir, { recursive: true, force: true });
      const runs = await pods.prepareUntilReady('etcd-2', { endpoints: 5 });
      expect(stepsOf(runs)).toEqual(expect.arrayContaining(['replace', 'join']));
      await startPod('etcd-2');
      await votersAre(ALL);
      await writer.stopAndVerify();
      const after = await membersOf('etcd-2');
      expect(after).toHaveLength(1);
      expect(after[0].id).not.toBe(before);
      await expectOneCluster(ALL);
    },
  );

  // prepare SIGKILLed at its steps: its own idempotence, the same against every etcd.
  itOnFirstVersion(
    "when a removed member's pod restarts with its old data and prepare is killed while moving it, then the data is moved aside once (kept, dated) and the pod joins again",
    async () => {
      const pod = pods.pod('etcd-4');
      const old = walMember('etcd-4');
      const left = await call(pods.pod('etcd-0').agent?.listening.url ?? '', {
        method: 'POST',
        path: '/v1/members/leave',
        body: { name: 'etcd-4', peerURLs: [pod.peerURL], timeoutSeconds: 20 },
        localAddress: pods.pod('etcd-0').host,
      });
      expect(left.json).toMatchObject({ outcome: 'removed' });
      await stopPod('etcd-4');
      // Killed right after the start script moved the directory aside (a crash point: a kill sent on the
      // step's log line races the move, and prepare may finish before it lands), then run again.
      const killed = await pods.prepare('etcd-4', { endpoints: 5, crashAt: 'prepare-moved-aside' });
      expect(killed.signal).toBe('SIGKILL');
      const runs = [killed, ...(await pods.prepareUntilReady('etcd-4', { endpoints: 5 }))];
      expect(stepsOf(runs)).toEqual(expect.arrayContaining(['move-aside', 'join']));
      const aside = fs.readdirSync(path.dirname(pod.dataDir)).filter((f) => /^default\.etcd\.removed-\d{8}T\d{6}Z/.test(f));
      expect(aside).toHaveLength(1);
      const kept = readDataDir(path.join(path.dirname(pod.dataDir), aside[0]));
      expect(kept).toMatchObject({ kind: 'member', memberId: old });
      await startPod('etcd-4');
      await votersAre(ALL);
      expect(await membersOf('etcd-4')).toHaveLength(1);
    },
  );

  // prepare SIGKILLed at its steps: its own idempotence, the same against every etcd.
  itOnFirstVersion(
    'when prepare is killed at each step of a lost-disk recovery and run again, then it converges with one member for the pod',
    async () => {
      await stopPod('etcd-3', true);
      fs.rmSync(pods.pod('etcd-3').dataDir, { recursive: true, force: true });
      const seen: unknown[] = [];
      for (const step of ['replace', 'join']) {
        for (let attempt = 0; ; attempt++) {
          const run = await pods.prepare('etcd-3', { endpoints: 5, killOn: (l) => l.message === 'prepare step' && l.step === step });
          seen.push(...stepsOf([run]));
          expect((await membersOf('etcd-3')).length).toBeLessThanOrEqual(1);
          if (run.signal === 'SIGKILL') break;
          expect(attempt).toBeLessThan(3);
        }
      }
      const killedAfter = await pods.prepare('etcd-3', { endpoints: 5, crashAt: 'prepare-flags-written' });
      expect(killedAfter.signal).toBe('SIGKILL');
      expect(await membersOf('etcd-3')).toHaveLength(1);
      const runs = await pods.prepareUntilReady('etcd-3', { endpoints: 5 });
      expect(decided(runs[runs.length - 1])).toMatchObject({ state: 'existing' });
      expect(seen).toEqual(expect.arrayContaining(['replace', 'join']));
      await startPod('etcd-3');
      await votersAre(ALL);
      expect(await membersOf('etcd-3')).toHaveLength(1);
    },
  );

  it('when no quorum answers (3 of 5 voters down), then a pod without data waits and says why with the quorum figures, at once on each pass', async () => {
    const down = ['etcd-2', 'etcd-3', 'etcd-4'];
    await Promise.all(down.map((n) => pods.stopAgent(n)));
    await Promise.all(down.map((n) => pods.stopEtcd(n, true)));
    const data = pods.pod('etcd-4').dataDir;
    fs.renameSync(data, `${data}.test-hidden`);

    const waited = await pods.prepare('etcd-4', { waitSeconds: 3, endpoints: 5 });

    expect(waited.code).toBe(1);
    const reasons = waited.lines.filter((l) => l.message === 'waiting' || l.level === 'error').map((l) => String(l.reason));
    expect(reasons.length).toBeGreaterThanOrEqual(2);
    for (const reason of reasons) expect(reason).toContain('no quorum: 2 of 5 voters answer, 3 needed');
    expect(readDataDir(data)).toEqual({ kind: 'empty' });
    fs.rmSync(data, { recursive: true, force: true });
    fs.renameSync(`${data}.test-hidden`, data);
    // Each has its data: prepare starts it as is (the run above removed etcd-4's flags file).
    for (const run of await Promise.all(down.map((n) => pods.prepare(n, { endpoints: 5 }))))
      expect(decided(run)).toMatchObject({ state: 'existing' });
    for (const name of down) pods.startEtcd(name);
    await Promise.all(down.map((n) => eventually(async () => expect(await pods.healthy(n)).toBe(true), { within: 30_000, every: 100 })));
    await Promise.all(down.map((n) => pods.startAgent(n)));
    await votersAre(ALL);
  });

  it('when every member is down and they restart in any order with their data, then none bootstraps a new cluster, and a pod without data waits', async () => {
    const ids = Object.fromEntries(ALL.map((n) => [n, walMember(n)]));
    await Promise.all(ALL.map((n) => pods.stopAgent(n)));
    // All at once, as a power loss would: no member gets to hand anything over.
    await Promise.all(ALL.map((n) => pods.stopEtcd(n, true)));

    // etcd-0 without its data while the cluster is down: the others have data (or no prepare answers), so it must wait.
    const data = pods.pod('etcd-0').dataDir;
    fs.renameSync(data, `${data}.test-hidden`);
    const waited = await pods.prepare('etcd-0', { waitSeconds: 2, endpoints: 5 });
    expect(waited.code).toBe(1);
    expect(String(waited.lines.find((l) => l.level === 'error')?.reason)).toContain(
      'not every initial member reports an empty data directory',
    );
    expect(readDataDir(data)).toEqual({ kind: 'empty' });
    fs.rmSync(data, { recursive: true, force: true });
    fs.renameSync(`${data}.test-hidden`, data);

    const order = ['etcd-3', 'etcd-1', 'etcd-4', 'etcd-0', 'etcd-2'];
    const runs = await Promise.all(order.map((n) => pods.prepare(n, { endpoints: 5 })));
    for (const run of runs) expect(decided(run)).toMatchObject({ state: 'existing' });
    // One after the other in that order: each started once the one before has begun (its first log line).
    for (const name of order) {
      const logged = pods.etcdLog(name).length;
      pods.startEtcd(name);
      await eventually(() => pods.etcdLog(name).length > logged, { within: 10_000, every: 20 });
    }
    await Promise.all(order.map((n) => eventually(async () => expect(await pods.healthy(n)).toBe(true), { within: 30_000, every: 100 })));
    await votersAre(ALL);
    await expectOneCluster(ALL);
    expect(Object.fromEntries(ALL.map((n) => [n, walMember(n)]))).toEqual(ids);
  });
});
