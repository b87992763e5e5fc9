import { mustRejoin, RejoinFacts } from '../../agent/recovery/rejoin-rule';

const record: NonNullable<RejoinFacts['record']> = {
  clusterId: 'c1',
  from: { name: 'etcd-0', id: 'a0', committedIndex: 200, raftTerm: 3 },
  removed: [
    { name: 'etcd-1', id: 'a1', kind: 'behind', committedIndex: 60 },
    { name: 'etcd-2', id: 'a2', kind: 'lost', committedIndex: null },
  ],
};

describe('mustRejoin', () => {
  it.each<[string, Partial<RejoinFacts>, boolean]>([
    ['a survivor the record names as removed, its etcd without a leader', {}, true],
    ['a survivor the record names as removed, its etcd down', { leaderId: undefined }, true],
    ['a lost member whose old data came back, named as removed', { dataDir: { memberId: 'a2', clusterId: 'c1' } }, true],
    ['its etcd knows a leader (it is a member of a live cluster)', { leaderId: 'a0' }, false],
    ['the member recovered from', { dataDir: { memberId: 'a0', clusterId: 'c1' } }, false],
    ['a member the record does not name', { dataDir: { memberId: 'a9', clusterId: 'c1' } }, false],
    ['a member of another cluster with the same member id', { dataDir: { memberId: 'a1', clusterId: 'c2' } }, false],
    ['no data directory', { dataDir: undefined }, false],
    ['no record (no recovery was done, or it cannot be read)', { record: undefined }, false],
  ])('%s → %s', (_what, facts, expected) => {
    expect(mustRejoin({ dataDir: { memberId: 'a1', clusterId: 'c1' }, leaderId: '0', record, ...facts })).toBe(expected);
  });
});
