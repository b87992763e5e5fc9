/**
 * The etcd behaviour the agent is built on, besides data directories (etcd-data-dir-facts.test.ts),
 * re-checked on each etcd version the suite runs (shared/ETCD-FACTS.md): membership refusals, the
 * peer listener's member list, what Status and the health endpoints answer, and the flags each
 * version takes. Where versions differ, each assertion says what this version does; the README's
 * "etcd versions" table is the sum of them.
 */
import { execFile } from 'node:child_process';
import { Deadline } from '../../agent/lib/deadline';
import { EtcdCluster } from '../../agent/etcd/cluster-client';
import { fetchPeerMembers } from '../../agent/etcd/peer-members';
import { atLeast } from '../../agent/etcd/server-version';
import type { Member } from '../../agent/proto/types';
import { etcdInstall, type EtcdInstall } from '../../scripts/etcd-version';
import { freePorts, withCluster } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';

jest.setTimeout(patience(60_000));

/**
 * `fn` with both ends of its call inside one wall-clock second (etcd derives a member id from the peer
 * URLs and the second). When a call crosses into the next second all the same, `undo` takes back
 * what it changed (a member it added) before it is tried again.
 */
async function inOneSecond<T>(fn: () => Promise<T>, undo?: (value: T) => Promise<unknown>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    // Start early in a second, so that two calls on loopback end within it.
    const ms = Date.now() % 1000;
    if (ms > 300 && attempt < 20) {
      await new Promise((resolve) => setTimeout(resolve, 1000 - ms + 5));
    }
    const before = Math.floor(Date.now() / 1000);
    const value = await fn();
    if (Math.floor(Date.now() / 1000) === before || attempt >= 20) return value;
    await undo?.(value);
  }
}

/** What a call settled to: its value, or etcd's words. */
async function outcome<T>(call: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; etcd: string }> {
  try {
    return { ok: true, value: await call() };
  } catch (err) {
    const details = (err as { details?: { etcd?: string } }).details;
    return { ok: false, etcd: details?.etcd ?? String(err) };
  }
}

/** An HTTP GET of `url`: status and body. */
async function httpGet(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.text() };
}

describe('etcd membership and API facts', () => {
  // Each member also serves on a metrics URL, where kube-inject and deploy/ point the etcd container's probes.
  const metricsPorts = new Map<string, number>();
  beforeAll(async () => {
    const ports = await freePorts(4);
    ['etcd-0', 'etcd-1', 'etcd-2', 'etcd-3'].forEach((name, i) => metricsPorts.set(name, ports[i]));
  });
  const metricsURL = (name: string): string => `http://127.0.0.1:${metricsPorts.get(name)}`;
  const cluster = withCluster(3, { memberArgs: (m) => [`--listen-metrics-urls=${metricsURL(m.name)}`] });
  let admin: EtcdCluster;
  const version = (): string => cluster().etcd.version;
  const minor = (): string => cluster().etcd.minor;
  const add = (peerURL: string, learner = true, ms = 3000): Promise<Member> => admin.addMember([peerURL], learner, Deadline.in(ms));
  const remove = (id: string): Promise<void> => admin.removeMember(id, Deadline.in(5000));

  beforeAll(async () => {
    admin = new EtcdCluster({ endpoints: cluster().clientURLs() });
    // etcd refuses changes as "unhealthy cluster" for 5 s after its peers connected (every version).
    await eventually(async () => remove((await add(await cluster().reservePeerURL('settle'))).id), { within: 20_000, every: 250 });
  });
  afterAll(() => admin?.close());

  it('when the same learner is added twice in one second, then "member ID already exist"; a second learner with other URLs, "too many learner members"; its URLs again in the same second after its removal, "member not found"', async () => {
    const peerURL = await cluster().reservePeerURL('twice');
    const [first, again] = await inOneSecond(
      async () => [await add(peerURL), await outcome(() => add(peerURL))] as const,
      ([added, second]) => Promise.all([remove(added.id), second.ok ? remove(second.value.id) : undefined]),
    );
    expect(again).toEqual({ ok: false, etcd: expect.stringMatching(/FAILED_PRECONDITION: etcdserver: member ID already exist$/) });

    const second = await outcome(async () => add(await cluster().reservePeerURL('second')));
    expect(second).toEqual({
      ok: false,
      etcd: expect.stringMatching(/FAILED_PRECONDITION: etcdserver: too many learner members in cluster$/),
    });

    // The id of a removed member is refused for good: the same URLs in the same second make the same id.
    await remove(first.id);
    const readded = await inOneSecond(() => outcome(() => add(peerURL)));
    if (readded.ok) {
      // Added in the next second after all: another id.
      expect(readded.value.id).not.toBe(first.id);
      await remove(readded.value.id);
    } else {
      expect(readded.etcd).toMatch(/NOT_FOUND: etcdserver: member not found$/);
    }
  });

  it('when a voter is added while a learner is unstarted, then it is accepted (4 voters, 3 started); a learner added then is refused as "unhealthy cluster" by 3.4 and accepted by 3.5.30+, 3.6.11+ and 3.7 (a quorum of the voters after the add is connected)', async () => {
    const learner = await add(await cluster().reservePeerURL('waiting'));
    const voter = await add(await cluster().reservePeerURL('voter'), false);
    await remove(learner.id);
    const list = await admin.listMembers(Deadline.in(5000));
    expect(list.members.filter((m) => !m.isLearner)).toHaveLength(4);
    expect(list.members.filter((m) => !m.isLearner && m.started)).toHaveLength(3);

    const another = await outcome(async () => add(await cluster().reservePeerURL('another')));
    const relaxed =
      atLeast(version(), 3, 7) ||
      (minor() === '3.6' && atLeast(version(), 3, 6, 11)) ||
      (minor() === '3.5' && atLeast(version(), 3, 5, 30));
    if (relaxed) {
      expect(another.ok).toBe(true);
      if (another.ok) await remove(another.value.id);
    } else {
      expect(another).toEqual({ ok: false, etcd: expect.stringMatching(/UNAVAILABLE: etcdserver: unhealthy cluster$/) });
    }
    await remove(voter.id);
  });

  it('when a started learner is there, then its peer listener serves the member list (it flagged isLearner, ids bare uint64), it refuses MemberList and linearizable reads (not serializable ones), its /readyz fails non_learner from 3.5.19 and its /livez passes from 3.5.11 (3.4: neither exists)', async () => {
    const spec = await cluster().reserveMember('etcd-3');
    const learner = await eventually(() => add(spec.peerURL), { within: 15_000, every: 250 });
    await cluster().addMemberProcess('etcd-3');
    try {
      const raw = (await httpGet(`${spec.peerURL}/members`)).body;
      expect(raw).toMatch(/^\[\{"id":\d+,/); // a bare number, which JSON.parse would round
      const fromPeer = await fetchPeerMembers(spec.peerURL, 2000);
      expect(fromPeer.find((m) => m.id === learner.id)).toMatchObject({
        name: 'etcd-3',
        isLearner: true,
        clientURLs: [cluster().member('etcd-3').clientURL],
      });
      expect(fromPeer.filter((m) => !m.isLearner)).toHaveLength(3);

      const own = cluster().member('etcd-3').clientURL;
      const [livez, readyz, health] = await Promise.all(['/livez', '/readyz?verbose', '/health'].map((p) => httpGet(`${own}${p}`)));
      // The metrics listener answers the same.
      expect((await httpGet(`${metricsURL('etcd-3')}/readyz?verbose`)).status).toBe(readyz.status);
      if (atLeast(version(), 3, 5, 11)) {
        expect(livez.status).toBe(200);
        if (atLeast(version(), 3, 5, 19)) {
          expect(readyz).toEqual({ status: 503, body: expect.stringContaining('[-]non_learner failed: not supported for learner') });
        } else {
          expect(readyz.status).toBe(200);
        }
      } else {
        expect([livez.status, readyz.status]).toEqual([404, 404]);
      }
      // /health says nothing of learners on any version.
      expect(health.status).toBe(200);

      // The learner serves Status and serializable reads only: not MemberList, nor a linearizable read.
      const client = new EtcdCluster({ endpoints: [own] });
      try {
        expect(await outcome(() => client.memberListAt(own, 2000))).toEqual({
          ok: false,
          etcd: expect.stringMatching(/etcdserver: rpc not supported for learner$/),
        });
        const read = (serializable: boolean): Promise<unknown> =>
          client.raw
            .get('x')
            .options({ deadline: new Date(Date.now() + 2000) })
            .serializable(serializable)
            .string();
        expect(await outcome(() => read(true))).toEqual({ ok: true, value: null });
        expect(await outcome(() => read(false))).toEqual({ ok: false, etcd: expect.stringMatching(/rpc not supported for learner/) });
      } finally {
        client.close();
      }
    } finally {
      await cluster().kill('etcd-3');
      await remove(learner.id);
    }
  });

  it.each(['client', 'metrics'])(
    'when the health endpoints of a voter are asked at its %s URL, then /health has a reason from 3.5, and /livez, /readyz answer from 3.5.11 with the checks each names',
    async (listener) => {
      const url = listener === 'client' ? cluster().member('etcd-0').clientURL : metricsURL('etcd-0');
      const [health, livez, readyz] = await Promise.all(['/health', '/livez?verbose', '/readyz?verbose'].map((p) => httpGet(`${url}${p}`)));
      expect(health).toEqual({ status: 200, body: minor() === '3.4' ? '{"health":"true"}' : '{"health":"true","reason":""}' });
      if (atLeast(version(), 3, 5, 11)) {
        expect(livez).toEqual({ status: 200, body: expect.stringContaining('[+]serializable_read ok') });
        for (const check of [
          'data_corruption',
          'serializable_read',
          'linearizable_read',
          ...(atLeast(version(), 3, 5, 19) ? ['non_learner'] : []),
        ]) {
          expect(readyz.body).toContain(`[+]${check} ok`);
        }
        expect(readyz.status).toBe(200);
      } else {
        expect([livez.status, readyz.status]).toEqual([404, 404]);
      }
    },
  );

  it('when a gRPC client calls a peer URL, then 3.4 and 3.5 answer it there and 3.6+ no longer do', async () => {
    const peerURL = cluster().member('etcd-0').peerURL;
    const client = new EtcdCluster({ endpoints: [peerURL] });
    try {
      const answer = await outcome(() => client.memberListAt(peerURL, 2000));
      if (minor() === '3.4' || minor() === '3.5') {
        expect(answer.ok && answer.value.members.length).toBe(3);
      } else {
        expect(answer).toEqual({ ok: false, etcd: expect.stringMatching(/UNAVAILABLE/) });
      }
    } finally {
      client.close();
    }
  });

  it('when etcdctl prints Status and the member list as JSON, then ids are bare uint64 numbers, and from 3.6 Status adds storageVersion, dbSizeQuota and downgradeInfo', async () => {
    const url = cluster().member('etcd-0').clientURL;
    const status = await cluster().etcdctl(['endpoint', 'status', '-w', 'json'], [url]);
    const members = await cluster().etcdctl(['member', 'list', '-w', 'json'], [url]);
    expect(status).toMatch(/"member_id":\d{4,}/);
    expect(members).toMatch(/"ID":\d{4,}/);
    const fields = Object.keys((JSON.parse(status) as Array<{ Status: Record<string, unknown> }>)[0].Status).sort();
    const added = ['downgradeInfo', 'storageVersion', 'dbSizeQuota'];
    if (atLeast(version(), 3, 6)) expect(fields).toEqual(expect.arrayContaining(added));
    else expect(fields.filter((f) => added.includes(f))).toEqual([]);
  });

  // Last: it ends the cluster as it was. What the recovery (README "When the quorum is lost") relies on.
  it('when the other members are gone for good and etcd-0 restarts on its data with --force-new-cluster, then it is a one-member cluster with the same cluster id and every key', async () => {
    const url = cluster().member('etcd-0').clientURL;
    await cluster().etcdctl(['put', 'recovery-fact', 'kept'], [url]);
    // A second write through etcd-0 before the SIGKILL: a member learns that an entry is committed
    // after storing it, and etcd writes a commit index that comes with no new entry into its WAL's
    // buffer only (no fsync needed), while --force-new-cluster keeps only the entries up to the commit
    // index on disk. A member killed within ~100 ms of answering a put (before its backend's next
    // batch commit) can lose that put. The next entry it stores is flushed and synced, and the
    // commit index before it with it.
    await cluster().etcdctl(['put', 'recovery-fact-flushed', 'yes'], [url]);
    // Ids as etcdctl prints them (bare uint64, past JSON.parse's precision): read as text.
    const clusterId = async (): Promise<string | undefined> =>
      /"cluster_id":(\d+)/.exec(await cluster().etcdctl(['member', 'list', '-w', 'json'], [url]))?.[1];
    const before = await clusterId();
    expect(before).toMatch(/^\d+$/);
    for (const name of ['etcd-1', 'etcd-2', 'etcd-0']) await cluster().kill(name);
    await cluster().restart('etcd-0', { args: ['--force-new-cluster'] });
    expect(await clusterId()).toBe(before);
    const list = await cluster().etcdctl(['member', 'list', '-w', 'json'], [url]);
    expect(list.match(/"ID":\d+/g)).toHaveLength(1);
    expect(await cluster().etcdctl(['get', 'recovery-fact', '--print-value-only'], [url])).toBe('kept\n');
  });
});

describe('etcd flags', () => {
  const etcd = (): EtcdInstall => etcdInstall();
  /** Whether this version's etcd accepts `flag` (flags are parsed before --version is acted on). */
  const accepts = (flag: string): Promise<boolean> =>
    new Promise((resolve) => execFile(etcd().etcd, [flag, '--version'], { timeout: 10_000 }, (err) => resolve(err === null)));

  // [flag, the first minor version without it] — an unknown flag stops etcd, so the harness passes each version only its own.
  it.each<[string, string]>([
    ['--debug', '3.5'],
    ['--log-package-levels=etcdserver=INFO', '3.5'],
    ['--log-output=stderr', '3.5'],
    ['--enable-v2=false', '3.6'],
    ['--experimental-enable-v2v3=/v2', '3.6'],
    ['--proxy=off', '3.6'],
    ['--experimental-initial-corrupt-check=false', '3.7'],
    ['--discovery=http://127.0.0.1:9', '3.7'],
    ['--discovery-proxy=http://127.0.0.1:9', '3.7'],
  ])('when etcd is given %s, then it is refused from etcd %s on and accepted before', async (flag, goneIn) => {
    expect(await accepts(flag)).toBe(Number(etcd().minor.split('.')[1]) < Number(goneIn.split('.')[1]));
  });

  // [flag, the first minor version with it]
  it.each<[string, string]>([
    ['--experimental-stop-grpc-service-on-defrag=true', '3.5'],
    ['--max-learners=1', '3.6'],
    ['--feature-gates=StopGRPCServiceOnDefrag=true', '3.6'],
    ['--log-format=json', '3.6'],
    ['--discovery-srv=example.com', '3.4'],
  ])('when etcd is given %s, then it is accepted from etcd %s on', async (flag, from) => {
    const has = Number(etcd().minor.split('.')[1]) >= Number(from.split('.')[1]);
    const goneIn37 = flag.startsWith('--experimental-') && etcd().minor === '3.7';
    expect(await accepts(flag)).toBe(has && !goneIn37);
  });

  it('when etcd prints its help, then --pre-vote defaults to false on 3.4 and true from 3.5', async () => {
    const help = await new Promise<string>((resolve) =>
      execFile(etcd().etcd, ['--help'], { timeout: 10_000, maxBuffer: 4 << 20 }, (_err, stdout, stderr) => resolve(`${stdout}${stderr}`)),
    );
    expect(/--pre-vote '(true|false)'/.exec(help)?.[1]).toBe(etcd().minor === '3.4' ? 'false' : 'true');
  });
});
