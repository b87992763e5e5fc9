import { Deadline } from '../../agent/deadline';
import { EtcdCluster } from '../../agent/etcd/cluster-client';
import { AgentError } from '../../agent/proto/errors';
import type { Member, MemberStatus } from '../../agent/proto/types';
import { eventually, withCluster } from '../helpers/etcd-cluster';

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
      expect(m).toEqual({ id: m.id, name: local.name, peerURLs: [local.peerURL], clientURLs: [local.clientURL], isLearner: false, started: true });
    }
    expect(list.clusterId).toBe(expected.clusterId);
    expect(list.members.map((m) => m.id)).toContain(list.answeredBy);
    expect(list.raftTerm).toBeGreaterThan(0);
    expect(changes).toEqual([]); // a read sends no membership RPC
  });

  it('when each member is asked for its status, then each answers for itself and all name the same leader', async () => {
    const { members } = await client.listMembers(Deadline.in(5000));
    const before = statusCalls;

    const statuses = await Promise.all(members.map((m) => client.memberStatus(m.clientURLs[0], 1000)));

    expect(statusCalls - before).toBe(3);
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
      expect(s.latencyMs).toBeLessThan(1000);
    }
  });

  it('when a follower is paused, then its status call fails fast as unavailable, the others answer, and the list still reads', async () => {
    const c = cluster();
    const { members } = await client.listMembers(Deadline.in(5000));
    const first = await client.memberStatus(members[0].clientURLs[0], 1000);
    const follower = members.find((m) => m.id !== first.leaderId) as Member;
    const others = members.filter((m) => m !== follower);
    c.pause(follower.name);
    try {
      const paused = await timed(() => client.memberStatus(follower.clientURLs[0], 500));

      expect(paused.value).toBeUndefined();
      expect(paused.error).toBeInstanceOf(AgentError);
      expect(paused.error).toMatchObject({ code: 'unavailable', status: 503, retryable: true });
      expect(paused.ms).toBeLessThan(2000);

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

    const resumed = await eventually(() => client.memberStatus(follower.clientURLs[0], 1000), 5000, 100);
    expect(resumed).toMatchObject({ memberId: follower.id, leaderId: first.leaderId });
  }, 90_000);

  it('when a client is closed, then its calls reject as unavailable instead of hanging', async () => {
    const closed = new EtcdCluster({ endpoints: cluster().clientURLs() });
    await closed.listMembers(Deadline.in(5000));
    closed.close();

    const list = await timed(() => closed.listMembers(Deadline.in(5000)));
    const status = await timed(() => closed.memberStatus(cluster().member('etcd-0').clientURL, 500));

    expect(list.error).toMatchObject({ code: 'unavailable', retryable: true });
    expect(status.error).toMatchObject({ code: 'unavailable', message: 'the agent is shutting down' });
    expect(list.ms).toBeLessThan(1000);
  });
});
