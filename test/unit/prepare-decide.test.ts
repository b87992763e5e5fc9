import { classifyAnswer } from '../../agent/prepare/answer-server';
import { decidePrepare, initialClusterFromList, PeerAnswer, PrepareFacts, PrepareStep, samePlan } from '../../agent/prepare/decide';
import type { Member, MemberList } from '../../agent/proto/types';

const url = (n: number): string => `http://etcd-${n}.etcd-headless:2380`;
const initial = [0, 1, 2].map((n) => ({ name: `etcd-${n}`, peerURL: url(n) }));
const initialCluster = initial.map((m) => `${m.name}=${m.peerURL}`).join(',');
const token = 'etcd';

function member(n: number, over: Partial<Member> = {}): Member {
  return {
    id: `a${n}`,
    name: `etcd-${n}`,
    peerURLs: [url(n)],
    clientURLs: [`http://etcd-${n}.etcd-headless:2379`],
    isLearner: false,
    started: true,
    ...over,
  };
}

function list(members: Member[], clusterId = 'c1'): MemberList {
  return { clusterId, answeredBy: members[0]?.id ?? '0', raftTerm: 2, members };
}

const three = [member(0), member(1), member(2)];

function facts(over: Partial<PrepareFacts>): PrepareFacts {
  return {
    self: { name: 'etcd-1', peerURL: url(1) },
    dataDir: { kind: 'empty' },
    cluster: { kind: 'answered', list: list(three) },
    initial,
    token,
    ...over,
  };
}

const down: PrepareFacts['cluster'] = { kind: 'unreachable', reason: 'no endpoint answered' };
const peers = (a: PeerAnswer, b: PeerAnswer): Map<string, PeerAnswer> =>
  new Map([
    ['etcd-0', a],
    ['etcd-2', b],
  ]);
const empty: PeerAnswer = { kind: 'empty' };

type Row = [string, PrepareStep['kind'], 'new' | 'existing' | '-', Partial<PrepareFacts>];

describe('decidePrepare', () => {
  it.each<Row>([
    [
      'the data dir holds this member and the cluster lists it',
      'start',
      'existing',
      { dataDir: { kind: 'member', memberId: 'a1', clusterId: 'c1' } },
    ],
    [
      'the data dir holds a member the cluster removed',
      'move-aside',
      '-',
      { dataDir: { kind: 'member', memberId: 'dead', clusterId: 'c1' } },
    ],
    ['the data dir holds a member of another cluster', 'wait', '-', { dataDir: { kind: 'member', memberId: 'a1', clusterId: 'other' } }],
    [
      'the data dir holds a listed member with other peer URLs',
      'wait',
      '-',
      { dataDir: { kind: 'member', memberId: 'a0', clusterId: 'c1' } },
    ],
    ['the data dir holds files but no WAL', 'move-aside', '-', { dataDir: { kind: 'unusable', reason: 'no WAL' } }],
    [
      'the data dir holds files but no WAL and nothing answers',
      'move-aside',
      '-',
      { dataDir: { kind: 'unusable', reason: 'no WAL' }, cluster: down },
    ],
    [
      'the cluster does not list this member (scale-out)',
      'join',
      '-',
      { cluster: { kind: 'answered', list: list([member(0), member(2)]) } },
    ],
    ['the cluster lists this member as started and the data dir is empty (lost disk)', 'replace', '-', {}],
    [
      'the cluster lists this member unstarted (added earlier)',
      'start',
      'existing',
      {
        cluster: {
          kind: 'answered',
          list: list([member(0), member(2), member(1, { name: '', clientURLs: [], started: false, isLearner: true })]),
        },
      },
    ],
    [
      'the cluster lists this initial member, named but never run',
      'start',
      'existing',
      { cluster: { kind: 'answered', list: list([member(0), member(2), member(1, { clientURLs: [] })]) } },
    ],
    [
      'this peer URL belongs to a member of another name',
      'wait',
      '-',
      { cluster: { kind: 'answered', list: list([member(0), member(2), member(1, { name: 'etcd-9' })]) } },
    ],
    [
      'nothing answers and the data dir holds a member (all down, restarted)',
      'start',
      'existing',
      { cluster: down, dataDir: { kind: 'member', memberId: 'a1', clusterId: 'c1' } },
    ],
    ['nothing answers, the data dir is empty, the peers not asked yet', 'ask-peers', '-', { cluster: down }],
    ['nothing answers and every initial member reports an empty data dir', 'start', 'new', { cluster: down, peers: peers(empty, empty) }],
    [
      'nothing answers and a peer has decided the same bootstrap',
      'start',
      'new',
      { cluster: down, peers: peers({ kind: 'bootstrap', plan: { initialCluster, token } }, empty) },
    ],
    [
      'nothing answers and a peer bootstraps another cluster',
      'wait',
      '-',
      { cluster: down, peers: peers({ kind: 'bootstrap', plan: { initialCluster, token: 'other' } }, empty) },
    ],
    [
      'nothing answers and a peer has data (a cluster that is only down)',
      'wait',
      '-',
      { cluster: down, peers: peers(empty, { kind: 'has-data', detail: 'member' }) },
    ],
    [
      'nothing answers and a peer does not answer',
      'wait',
      '-',
      { cluster: down, peers: peers(empty, { kind: 'no-answer', detail: 'refused' }) },
    ],
    [
      'nothing answers and this pod decided the same bootstrap before (re-run)',
      'start',
      'new',
      { cluster: down, marker: { initialCluster, token } },
    ],
    [
      'nothing answers and the marker names another bootstrap',
      'ask-peers',
      '-',
      { cluster: down, marker: { initialCluster, token: 'old' } },
    ],
    ['nothing answers and this pod is not an initial member', 'wait', '-', { cluster: down, self: { name: 'etcd-3', peerURL: url(3) } }],
    [
      'nothing answers and the initial cluster gives this name another URL',
      'wait',
      '-',
      { cluster: down, self: { name: 'etcd-1', peerURL: url(7) } },
    ],
    [
      'a recovery of this cluster was ordered and nothing answers',
      'start',
      'existing',
      { cluster: down, dataDir: { kind: 'member', memberId: 'a1', clusterId: 'c1' }, recovery: { clusterId: 'c1' } },
    ],
    [
      'a recovery of another cluster was ordered and nothing answers',
      'wait',
      '-',
      { cluster: down, dataDir: { kind: 'member', memberId: 'a1', clusterId: 'c1' }, recovery: { clusterId: 'c9' } },
    ],
    [
      'a recovery was ordered but the cluster answers and lists this member',
      'start',
      'existing',
      { dataDir: { kind: 'member', memberId: 'a1', clusterId: 'c1' }, recovery: { clusterId: 'c1' } },
    ],
    [
      'a recovery was ordered but the data dir is empty and nothing answers',
      'ask-peers',
      '-',
      { cluster: down, recovery: { clusterId: 'c1' } },
    ],
  ])('when %s, then the step is %s %s', (_story, kind, state, over) => {
    const step = decidePrepare(facts(over));
    expect(step.kind).toBe(kind);
    if (state !== '-') expect(step.kind === 'start' && step.state).toBe(state);
  });

  it('when a recovery of its cluster was ordered and nothing answers, then it starts once with --force-new-cluster, and only then', () => {
    const held = { cluster: down, dataDir: { kind: 'member' as const, memberId: 'a1', clusterId: 'c1' } };
    expect(decidePrepare(facts({ ...held, recovery: { clusterId: 'c1' } }))).toMatchObject({
      kind: 'start',
      state: 'existing',
      once: ['--force-new-cluster'],
    });
    expect(decidePrepare(facts(held))).not.toHaveProperty('once');
    expect(decidePrepare(facts({ dataDir: held.dataDir, recovery: { clusterId: 'c1' } }))).not.toHaveProperty('once');
  });

  it('when it decides new, then --initial-cluster is the initial set', () => {
    const step = decidePrepare(facts({ cluster: down, peers: peers(empty, empty) }));
    expect(step).toMatchObject({ kind: 'start', state: 'new', initialCluster });
  });

  it('when it replaces a lost member, then it names the listed member to remove', () => {
    expect(decidePrepare(facts({}))).toMatchObject({ kind: 'replace', member: { id: 'a1' } });
  });

  it('when joining the live cluster, then --initial-cluster lists every member, this one by its name and unstarted ones by placeholders', () => {
    const l = list([
      member(0),
      member(2),
      member(3, { name: '', clientURLs: [], started: false }),
      member(1, { name: '', clientURLs: [], started: false }),
    ]);
    expect(initialClusterFromList(l, { name: 'etcd-1', peerURL: url(1) })).toBe(
      `etcd-0=${url(0)},etcd-2=${url(2)},unstarted-2=${url(3)},etcd-1=${url(1)}`,
    );
  });

  it.each([
    ['the same entries in another order and case', true, `etcd-1=${url(1).toUpperCase()},etcd-0=${url(0)},etcd-2=${url(2)}`, token],
    ['another token', false, initialCluster, 'x'],
    ['one member fewer', false, `etcd-0=${url(0)},etcd-1=${url(1)}`, token],
  ])('when two plans differ by %s, then samePlan is %s', (_story, same, ic, tk) => {
    expect(samePlan({ initialCluster, token }, { initialCluster: ic, token: tk })).toBe(same);
  });
});

describe('classifyAnswer', () => {
  it.each([
    ['an empty data directory', { name: 'etcd-0', dataDir: 'empty', bootstrap: null }, 'empty'],
    ['a bootstrap decided', { name: 'etcd-0', dataDir: 'empty', bootstrap: { initialCluster, token } }, 'bootstrap'],
    ['a data directory with a member', { name: 'etcd-0', dataDir: 'member', bootstrap: null }, 'has-data'],
    ['another pod', { name: 'etcd-9', dataDir: 'empty', bootstrap: null }, 'no-answer'],
    ['no bootstrap field', { name: 'etcd-0', dataDir: 'empty' }, 'no-answer'],
    ['a malformed plan', { name: 'etcd-0', dataDir: 'empty', bootstrap: { token: 1 } }, 'no-answer'],
    ['not an object', 'ok', 'no-answer'],
  ])('when a peer answers %s, then it counts as %s', (_what, body, kind) => {
    expect(classifyAnswer('etcd-0', body).kind).toBe(kind);
  });
});
