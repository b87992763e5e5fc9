/**
 * The etcd behaviour `prepare` is built on (shared/ETCD-FACTS.md, "Data
 * directories and bootstrap"), re-checked on real etcd processes: if one of
 * these changes with an etcd version, prepare's decisions must change too.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Deadline } from '../../agent/lib/deadline';
import { EtcdCluster } from '../../agent/etcd/cluster-client';
import { readDataDir } from '../../agent/etcd-data/data-dir';
import { withCluster } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';
import { PodSet } from '../helpers/prepare-pods';

jest.setTimeout(patience(60_000));

const THREE = ['etcd-0', 'etcd-1', 'etcd-2'];
let pods: PodSet;

beforeAll(async () => {
  pods = await PodSet.create(3, 3);
});

afterAll(async () => {
  await pods?.destroy();
});

async function bootstrap(names: string[]): Promise<void> {
  for (const n of names) {
    pods.writeFlags(n, 'new');
    pods.startEtcd(n);
  }
}

function ids(): Record<string, string> {
  return Object.fromEntries(
    THREE.map((n) => {
      const s = readDataDir(pods.pod(n).dataDir);
      return [n, s.kind === 'member' ? `${s.clusterId}/${s.memberId}` : s.kind];
    }),
  );
}

async function healthy(names: string[]): Promise<void> {
  await Promise.all(names.map((n) => eventually(async () => expect(await pods.healthy(n)).toBe(true), { within: 20_000, every: 100 })));
}

async function stopAll(): Promise<void> {
  await Promise.all(THREE.map((n) => pods.stopEtcd(n, true)));
}

let firstIds: Record<string, string> = {};
const backup = (): string => `${pods.pod('etcd-2').dataDir}.backup`;

describe('etcd data directories and bootstrap', () => {
  it('when two of three initial members have started, then the member list shows the third by name with no client URLs, and the WAL head names each member and the cluster', async () => {
    await bootstrap(['etcd-0', 'etcd-1']);
    await healthy(['etcd-0', 'etcd-1']);
    const client = new EtcdCluster({ endpoints: pods.endpoints(2) });
    try {
      const list = await client.listMembers(Deadline.in(5000));
      const third = list.members.find((m) => m.peerURLs.includes(pods.pod('etcd-2').peerURL));
      expect(third).toMatchObject({ name: 'etcd-2', clientURLs: [] });
      const wal = readDataDir(pods.pod('etcd-0').dataDir);
      expect(wal).toEqual({ kind: 'member', clusterId: list.clusterId, memberId: list.members.find((m) => m.name === 'etcd-0')?.id });
    } finally {
      client.close();
    }
    pods.writeFlags('etcd-2', 'new');
    pods.startEtcd('etcd-2');
    await healthy(THREE);
    firstIds = ids();
    await pods.stopEtcd('etcd-2');
    fs.cpSync(pods.pod('etcd-2').dataDir, backup(), { recursive: true });
  });

  // ETCD-FACTS says "panics with existing and new alike"; here `new` is refused one step earlier: the
  // member asks its peers, finds itself bootstrapped and exits. Either way it exits at every start.
  it.each([
    ['existing', 'panics (tocommit out of range)', /tocommit\(\d+\) is out of range \[lastIndex\(0\)\]/],
    ['new', 'exits as already bootstrapped', /member [0-9a-f]+ has already been bootstrapped/],
  ] as const)(
    'when a member the cluster still lists restarts with an empty data directory and --initial-cluster-state %s, then etcd %s',
    async (state, _what, said) => {
      await pods.stopEtcd('etcd-2', true);
      fs.rmSync(pods.pod('etcd-2').dataDir, { recursive: true, force: true });
      pods.writeFlags('etcd-2', state);
      const before = pods.etcdLog('etcd-2').length;
      pods.startEtcd('etcd-2');
      await pods.etcdExit('etcd-2');
      expect(pods.etcdLog('etcd-2').slice(before)).toMatch(said);
    },
  );

  it('when a removed member restarts with its own data, then etcd exits saying it was permanently removed', async () => {
    const client = new EtcdCluster({ endpoints: pods.endpoints(2) });
    try {
      const list = await client.listMembers(Deadline.in(5000));
      const id = list.members.find((m) => m.peerURLs.includes(pods.pod('etcd-2').peerURL))?.id ?? '';
      // etcd refuses as "unhealthy cluster" until the remaining members have been connected for 5 s.
      await eventually(() => client.removeMember(id, Deadline.in(5000)), { within: 15_000, every: 250 });
    } finally {
      client.close();
    }
    fs.rmSync(pods.pod('etcd-2').dataDir, { recursive: true, force: true });
    fs.renameSync(backup(), pods.pod('etcd-2').dataDir);
    const before = pods.etcdLog('etcd-2').length;
    pods.startEtcd('etcd-2');
    await pods.etcdExit('etcd-2');
    expect(pods.etcdLog('etcd-2').slice(before)).toMatch(/permanently removed/);
  });

  it('when all data directories are wiped and the same URLs bootstrap new with the same token, then the same member ids and cluster id come back', async () => {
    await stopAll();
    for (const n of THREE) fs.rmSync(pods.pod(n).dataDir, { recursive: true, force: true });
    await bootstrap(THREE);
    await healthy(THREE);
    expect(ids()).toEqual(firstIds);
  });
});

// etcd cuts a new WAL segment every 64 MB, each beginning with the same metadata record, and once a
// snapshot is past a segment it may purge it (at start and every 30 s, keeping --max-wals). 3.6
// snapshots every 10,000 entries by default, not 100,000, so old segments go sooner there: the
// member is read from the lowest segment present, never from a fixed name.
describe('etcd WAL segments', () => {
  const cluster = withCluster(1, { extraArgs: ['--snapshot-count=10', '--max-wals=1'] });

  it(
    'when more than one 64 MB segment was written and a snapshot passed the cut, then at restart the first segment is purged and the member is read from the lowest one left',
    async () => {
      const c = cluster();
      const walDir = path.join(c.member('etcd-0').dataDir, 'member', 'wal');
      const segments = (): string[] =>
        fs
          .readdirSync(walDir)
          .filter((f) => f.endsWith('.wal'))
          .sort();
      const before = readDataDir(c.member('etcd-0').dataDir);
      expect(before.kind).toBe('member');
      const client = new EtcdCluster({ endpoints: c.clientURLs() });
      try {
        const value = randomBytes(1_000_000);
        // Until a second segment exists, then 12 more entries, so that a snapshot (every 10) is past the cut.
        let after = 0;
        for (let i = 0; after < 12; i++) {
          await client.raw
            .put(`wal/${i % 4}`)
            .value(value)
            .exec();
          if (segments().length > 1) after++;
          if (i > 200) throw new Error(`no second WAL segment after ${i} MB`);
        }
      } finally {
        client.close();
      }
      expect(segments()[0]).toBe('0000000000000000-0000000000000000.wal');

      await c.restart('etcd-0');
      await eventually(async () => expect(segments()[0]).not.toBe('0000000000000000-0000000000000000.wal'), { within: 10_000, every: 100 });
      expect(segments()[0]).toMatch(/^0000000000000001-[0-9a-f]{16}\.wal$/);
      expect(readDataDir(c.member('etcd-0').dataDir)).toEqual(before);
    },
    patience(90_000),
  );
});
