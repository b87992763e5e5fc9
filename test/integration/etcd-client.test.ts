import { Deadline } from '../../agent/lib/deadline';
import { EtcdCluster } from '../../agent/etcd/cluster-client';
import { AgentError } from '../../agent/proto/errors';
import type { Member, MemberStatus } from '../../agent/proto/types';
import { withCluster } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';

/** The deadline of the status calls this file makes where a member answers (the agent's default is 500 ms). */
const STATUS_MS = 1000;

/** What a call settled to, and how long it took. */
async function timed<T>(call: () => Promise<T>): Promise<{ ms: number; value?: T; error?: unknown }> {
  const started = Date.now();
  try {
    const value = await call();
    return { ms: Date.now() - started, value };
  } catch (error) {
    return { ms: Date.now() - started, error };
  }
}

// One 3-member cluster and one client for the story; each test leaves the cluster as the next expects.
describe('EtcdCluster against a real 3-member cluster', () => {
  const cluster = withCluster(3);
  let client: EtcdCluster;
  let changes: string[];
  let statusCalls: number;

  beforeAll(() => {
    changes = [];
    statusCalls = 0;
    client = new EtcdCluster(
      { endpoints: cluster().clientURLs() },
      (kind) => changes.push(kind),
      () => statusCalls++,
    );
  });

  afterAll(() => {
    client?.close();
  });

  /** Members as etcdctl reports them: hex ids from its table output, decimal ids from its JSON converted to hex. */
  async function etcdctlMembers(): Promise<{ clusterId: string; members: Member[] }> {
    const c = cluster();
    // JSON numbers above 2^53 lose digits in JSON.parse: quote the uint64 fields before parsing.
    const raw = (await c.etcdctl(['member', 'list', '-w', 'json'])).replace(/"(ID|cluster_id|member_id)":(\d+)/g, '"$1":"$2"');
    const parsed = JSON.parse(raw) as {
      header: { cluster_id: string };
      members: Array<{ ID: string; name: string; peerURLs: string[]; clientURLs: string[]; isLearner?: boolean }>;
    };
    // `member list` (simple format): "8e9e05c52164694d, started, etcd-0, http://…:2380, http://…:2379, false".
    const simple = (await c.etcdctl(['member', 'list']))
      .trim()
      .split('\n')
      .map((line) => line.split(', '));
    const members = parsed.members.map((m) => {
      const id = BigInt(m.ID).toString(16);
      const row = simple.find((r) => r[2] === m.name);
      expect(row?.[0]).toBe(id); // the table's hex id and the JSON's decimal id are the same member
      return { id, name: m.name, peerURLs: m.peerURLs, clientURLs: m.clientURLs, isLearner: m.isLearner === true, started: true };
    });
    return { clusterId: BigInt(parsed.header.cluster_id).toString(16), members };
  }

  const byName = (a: Member, b: Member): number => a.name.localeCompare(b.name);

  it('when the member list is read, then it has 3 started voters with the ids, names and URLs etcdctl reports', async () => {
    const expected = await etcdctlMembers();

    const list = await client.listMembers(Deadline.in(5000));

    expect([...list.members].sort(byName)).toEqual([...expected.members].sort(byName));
    expect(list.members.map((m) => m.name).sort()).toEqual(['etcd-0', 'etcd-1', 'etcd-2']);
    for (const m of list.members) {
      expect(m.id).toMatch(/^[1-9a-f][0-9a-f]*$/);
      const local = cluster().member(m.name);
      expect(m).toEqual({
        id: m.id,
        name: local.name,
        peerURLs: [local.peerURL],
        clientURLs: [local.clientURL],
        isLearner: false,
        started: true,
      });
    }
    expect(list.clusterId).toBe(expected.clusterId);
    expect(list.members.map((m) => m.id)).toContain(list.answeredBy);
    expect(list.raftTerm).toBeGreaterThan(0);
    expect(changes).toEqual([]); // a read sends no membership RPC
  });

  it('when each member is asked for its status, then each answers for itself and all name the same leader', async () => {
    const { members } = await client.listMembers(Deadline.in(5000));
    const before = statusCalls;

    const statuses = await Promise.all(members.map((m) => client.memberStatus(m.clientURLs[0], STATUS_MS)));

    // Three here; a read hedged to an endpoint not asked before may still be asking its Status for its version.
    expect(statusCalls - before).toBeGreaterThanOrEqual(3);
    expect(statusCalls - before).toBeLessThanOrEqual(5);
    expect(statuses.map((s) => s.memberId)).toEqual(members.map((m) => m.id));
    const leaders = new Set(statuses.map((s) => s.leaderId));
    expect(leaders.size).toBe(1);
    const [leaderId] = leaders;
    expect(members.map((m) => m.id)).toContain(leaderId);
    expect(statuses.filter((s) => s.memberId === s.leaderId)).toHaveLength(1);
    for (const s of statuses) {
      expect(s).toMatchObject<Partial<MemberStatus>>({ isLearner: false, version: cluster().etcd.version, errors: [] });
      expect(s.raftTerm).toBeGreaterThan(0);
      expect(s.raftIndex).toBeGreaterThan(0);
      expect(s.dbSizeBytes).toBeGreaterThan(0);
      expect(s.latencyMs).toBeGreaterThanOrEqual(0);
      // Within the call's own deadline (the timeout passed: configuration.md ETCD_AGENT_STATUS_TIMEOUT_MS).
      expect(s.latencyMs).toBeLessThanOrEqual(STATUS_MS);
    }
  });

  it(
    'when a follower is paused, then its status call fails fast as unavailable, the others answer, and the list still reads',
    async () => {
      const c = cluster();
      const { members } = await client.listMembers(Deadline.in(5000));
      const first = await client.memberStatus(members[0].clientURLs[0], 1000);
      const follower = members.find((m) => m.id !== first.leaderId) as Member;
      const others = members.filter((m) => m !== follower);
      c.pause(follower.name);
      try {
        const paused = await timed(() => client.memberStatus(follower.clientURLs[0], 500));

        // Fails at its own 500 ms deadline, as the message says: its timer fired; no hang, no refusal.
        expect(paused.value).toBeUndefined();
        expect(paused.error).toBeInstanceOf(AgentError);
        expect(paused.error).toMatchObject({ code: 'unavailable', status: 503, retryable: true });
        expect(paused.error).toMatchObject({ message: 'etcd did not answer in time' });

        const live = await Promise.all(others.map((m) => client.memberStatus(m.clientURLs[0], 1000)));
        expect(live.map((s) => s.memberId)).toEqual(others.map((m) => m.id));
        expect(live.map((s) => s.leaderId)).toEqual([first.leaderId, first.leaderId]);

        // etcd3 picks a host at random for each call, so several reads surely try the paused one. Such an
        // attempt waits out its 3 s attempt timeout before the retry goes elsewhere (after three misses in a row the
        // host's circuit opens): a read may be slow, never wrong, and never fails inside a generous deadline.
        for (let i = 0; i < 5; i++) {
          const read = await timed(() => client.listMembers(Deadline.in(15_000)));
          expect(read.error).toBeUndefined();
          expect(read.value?.members.map((m) => m.id).sort()).toEqual(members.map((m) => m.id).sort());
          expect(read.value?.answeredBy).not.toBe(follower.id);
        }
      } finally {
        if (c.member(follower.name).state === 'paused') c.resume(follower.name);
      }

      const resumed = await eventually(() => client.memberStatus(follower.clientURLs[0], 1000), { within: 5000, every: 100 });
      expect(resumed).toMatchObject({ memberId: follower.id, leaderId: first.leaderId });
    },
    patience(90_000),
  );

  /** Range RPCs member `url` has served (etcd's own gRPC server metrics): the barrier read of `listMembers` is one. */
  async function rangesServed(url: string): Promise<number> {
    const text = await (await fetch(`${url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('grpc_server_started_total{') && l.includes('grpc_method="Range"'));
    return line === undefined ? 0 : Number(line.split(' ').pop());
  }

  it('when a member is added and removed through one member and the list is read at another at once, then the list shows each change; on 3.5+ without a barrier read once a Status told the version', async () => {
    const c = cluster();
    const [a, b] = ['etcd-0', 'etcd-1'].map((n) => c.member(n).clientURL);
    const writer = new EtcdCluster({ endpoints: [a] });
    const reader = new EtcdCluster({ endpoints: [b] });
    try {
      // The first read of an endpoint reads a key first (the barrier) on every version, and asks its
      // Status beside it for the version; from then on 3.5+ relies on `linearizable: true` alone.
      const barrierPerRead = c.etcd.minor === '3.4' ? 1 : 0;
      let before = await rangesServed(b);
      expect(reader.serverVersion(b)).toBeUndefined();
      await reader.listMembers(Deadline.in(5000));
      expect((await rangesServed(b)) - before).toBe(1);
      await eventually(async () => expect(reader.serverVersion(b)).toBe(c.etcd.version), { within: 5000, every: 20 });
      before = await rangesServed(b);
      for (let i = 0; i < 3; i++) {
        const peerURL = await c.reservePeerURL(`etcd-x${i}`);
        // etcd refuses changes as "unhealthy cluster" for 5 s after a peer connected (a fresh cluster).
        const added = await eventually(() => writer.addMember([peerURL], true, Deadline.in(3000)), { within: 15_000, every: 250 });
        expect((await reader.listMembers(Deadline.in(5000))).members.map((m) => m.id)).toContain(added.id);
        await writer.removeMember(added.id, Deadline.in(5000));
        expect((await reader.listMembers(Deadline.in(5000))).members.map((m) => m.id)).not.toContain(added.id);
      }
      expect((await rangesServed(b)) - before).toBe(6 * barrierPerRead);
    } finally {
      writer.close();
      reader.close();
    }
  });

  it('when the first endpoint is a learner, then reads, writes and the alarm list go to a voter: its refusal (gRPC 14 before 3.6, 9 from 3.6) moves the call on', async () => {
    const c = cluster();
    const spec = await c.reserveMember('etcd-learner');
    const admin = new EtcdCluster({ endpoints: c.clientURLs() });
    const learnerFirst = new EtcdCluster({ endpoints: [spec.clientURL, c.member('etcd-0').clientURL] });
    try {
      const added = await eventually(() => admin.addMember([spec.peerURL], true, Deadline.in(3000)), { within: 15_000, every: 250 });
      await c.addMemberProcess('etcd-learner');
      const status = await learnerFirst.memberStatus(spec.clientURL, 1000);
      expect(status).toMatchObject({ memberId: added.id, isLearner: true });
      // What the learner itself answers, as etcd3 hands it over: the class says the gRPC code its version sent.
      const refused = await learnerFirst.raw.cluster.memberList({ linearizable: true }).catch((err: Error) => err);
      expect(String(refused)).toMatch(/rpc not supported for learner/);
      expect((refused as Error).constructor.name).toBe(
        c.etcd.minor === '3.4' || c.etcd.minor === '3.5' ? 'GRPCUnavailableError' : 'GRPCFailedPreconditionError',
      );

      const list = await learnerFirst.listMembers(Deadline.in(5000));
      expect(list.answeredBy).not.toBe(added.id);
      await learnerFirst.write(Deadline.in(5000), (client, at) =>
        client.put('/etcd-lifecycle-agent/learner-first').value('1').options({ deadline: at }).exec(),
      );
      expect(await learnerFirst.alarms(Deadline.in(5000))).toEqual([]);
      expect(learnerFirst.endpointOrder()[0]).not.toBe(spec.clientURL);

      await admin.removeMember(added.id, Deadline.in(5000));
    } finally {
      await c.kill('etcd-learner');
      admin.close();
      learnerFirst.close();
    }
  });

  it('when a client is closed, then its calls reject as unavailable instead of hanging', async () => {
    const closed = new EtcdCluster({ endpoints: cluster().clientURLs() });
    await closed.listMembers(Deadline.in(5000));
    closed.close();

    const list = await timed(() => closed.listMembers(Deadline.in(5000)));
    const status = await timed(() => closed.memberStatus(cluster().member('etcd-0').clientURL, 500));

    // Refused as unavailable, saying why: a call that hung would end as a timeout at its 5 s deadline.
    expect(list.error).toMatchObject({ code: 'unavailable', retryable: true, message: 'the agent is shutting down' });
    expect(status.error).toMatchObject({ code: 'unavailable', message: 'the agent is shutting down' });
  });
});
