import { changedLeadership, electionsOf, guardsOf, meets, raftEvents, RaftEvent, RECONFIG_GUARD_MS } from '../helpers/raft-record';

const elected = (member: string, at: number, leader: string, term: number): RaftEvent => ({ member, at, kind: 'elected', leader, term });
const lost = (member: string, at: number, leader: string, term: number): RaftEvent => ({ member, at, kind: 'lost', leader, term });
const start = (member: string, at: number): RaftEvent => ({ member, at, kind: 'start', id: member });

/** Three members a, b, c that agreed on a at term 2 from time 10. */
const formed = [elected('a', 0, 'a', 2), elected('b', 10, 'a', 2), elected('c', 12, 'a', 2)];

describe('electionsOf: stretches in which no quorum of the voters agreed on one leader, from their own log lines', () => {
  it.each<[string, RaftEvent[], number, Array<[number, number | undefined, string | undefined, string | undefined]>]>([
    ['a cluster forms: its first election ends when a quorum names the leader', formed, 3, [[0, 10, undefined, 'a@2']]],
    [
      'the leader is killed: from the first member that loses it to the second that names the new one (the dead leader never speaks again)',
      [...formed, lost('b', 100, 'a', 3), elected('b', 105, 'b', 3), lost('c', 101, 'a', 3), elected('c', 106, 'b', 3)],
      3,
      [
        [0, 10, undefined, 'a@2'],
        [100, 106, 'a@2', 'b@3'],
      ],
    ],
    [
      "a killed leader's stale line does not end an election that re-elects no one",
      [...formed, lost('b', 100, 'a', 3), elected('b', 105, 'b', 3)],
      3,
      [
        [0, 10, undefined, 'a@2'],
        [100, undefined, 'a@2', undefined],
      ],
    ],
    [
      'a follower restarts and names the same leader at the same term: no election',
      [...formed, start('c', 200), elected('c', 210, 'a', 2)],
      3,
      [[0, 10, undefined, 'a@2']],
    ],
    [
      'a member that starts again inside an election counts only what it logs after its start',
      [...formed, lost('b', 100, 'a', 3), elected('c', 101, 'c', 3), start('c', 102), elected('b', 110, 'c', 3), elected('c', 120, 'c', 3)],
      3,
      [
        [0, 10, undefined, 'a@2'],
        [100, 120, 'a@2', 'c@3'],
      ],
    ],
    [
      'a follower loses the leader and finds it again at the same term (a thawed follower): a stretch that the others, still naming it, end at once',
      [...formed, lost('b', 100, 'a', 2), elected('b', 101, 'a', 2)],
      3,
      [
        [0, 10, undefined, 'a@2'],
        [100, 101, 'a@2', 'a@2'],
      ],
    ],
    [
      'five voters need three lines naming the new leader',
      [
        ...['a', 'b', 'c', 'd', 'e'].map((m, i) => elected(m, i, 'a', 2)),
        lost('b', 100, 'a', 3),
        elected('b', 101, 'b', 3),
        elected('c', 102, 'b', 3),
        elected('d', 103, 'b', 3),
      ],
      5,
      [
        [0, 2, undefined, 'a@2'],
        [100, 103, 'a@2', 'b@3'],
      ],
    ],
  ])('when %s', (_what, events, voters, expected) => {
    const found = electionsOf(events, voters).map((e) => [
      e.from,
      e.to,
      e.before && `${e.before.leader}@${e.before.term}`,
      e.after && `${e.after.leader}@${e.after.term}`,
    ]);
    expect(found).toEqual(expected);
    expect(electionsOf(events, voters).filter(changedLeadership)).toHaveLength(expected.filter(([, , b, a]) => b !== a).length);
  });
});

describe('raftEvents: the lines of an etcd log that say something about raft', () => {
  it('when a log holds 3.4 and 3.6 lines, a start script line and a torn line, then it reads the views, the starts, the peers and the hand-overs', () => {
    const log = [
      'etcd start: --name=etcd-0',
      '{"level":"info","ts":"2026-12-05T23:13:43.904Z","caller":"raft/raft.go:389","msg":"newRaft bdae9bbc11dd390d [peers: [], term: 0, commit: 0, applied: 0, lastindex: 0, lastterm: 0]"}',
      '{"level":"info","ts":"2026-12-05T23:13:44.118Z","caller":"rafthttp/peer_status.go:51","msg":"peer became active","peer-id":"3760a4ec3b84f7fa"}',
      '{"level":"warn","ts":"2026-12-05T23:13:47.769Z","caller":"rafthttp/peer_status.go:68","msg":"peer became inactive (message send to peer failed)","peer-id":"3760a4ec3b84f7fa","error":"failed to read 3760a4ec3b84f7fa on stream MsgApp v2 (unexpected EOF)"}',
      '{"level":"info","ts":"2026-12-05T23:13:48.458Z","caller":"raft/node.go:333","msg":"raft.node: bdae9bbc11dd390d lost leader 2943212f5e2cf73 at term 3"}',
      '{"level":"info","ts":"2026-12-05T23:13:48.459245Z","logger":"raft","caller":"v3@v3.6.0/node.go:370","msg":"raft.node: bdae9bbc11dd390d elected leader 3760a4ec3b84f7fa at term 3"}',
      '{"level":"info","ts":"2026-12-05T23:13:49.000Z","msg":"bdae9bbc11dd390d became leader at term 4"}',
      '{"level":"info","ts":"2026-12-05T23:13:50.000Z","logger":"raft","msg":"bdae9bbc11dd390d [term 4] starts to transfer leadership to 3760a4ec3b84f7fa"}',
      '{"level":"info","ts":"2026-12-05T23:13',
    ].join('\n');
    const at = (ts: string): number => Date.parse(ts);
    expect(raftEvents('etcd-0', log)).toEqual([
      { member: 'etcd-0', at: at('2026-12-05T23:13:43.904Z'), kind: 'start', id: 'bdae9bbc11dd390d' },
      { member: 'etcd-0', at: at('2026-12-05T23:13:44.118Z'), kind: 'peer-active', peer: '3760a4ec3b84f7fa' },
      { member: 'etcd-0', at: at('2026-12-05T23:13:47.769Z'), kind: 'peer-inactive', peer: '3760a4ec3b84f7fa' },
      { member: 'etcd-0', at: at('2026-12-05T23:13:48.458Z'), kind: 'lost', leader: '2943212f5e2cf73', term: 3 },
      { member: 'etcd-0', at: at('2026-12-05T23:13:48.459Z'), kind: 'elected', leader: '3760a4ec3b84f7fa', term: 3 },
      { member: 'etcd-0', at: at('2026-12-05T23:13:50.000Z'), kind: 'transfer', to: '3760a4ec3b84f7fa', term: 4 },
    ]);
  });
});

describe('guardsOf and meets', () => {
  it('when a peer went at t0 and came back at t1, then its guard runs from t0 to t1 + 5 s; one still gone keeps its guard open', () => {
    const guards = guardsOf([
      { member: 'a', at: 0, kind: 'peer-active', peer: 'b' },
      { member: 'a', at: 200, kind: 'peer-inactive', peer: 'b' },
      { member: 'a', at: 300, kind: 'peer-inactive', peer: 'b' },
      { member: 'a', at: 900, kind: 'peer-active', peer: 'b' },
      { member: 'a', at: 950, kind: 'peer-inactive', peer: 'c' },
    ]);
    expect(guards).toEqual([
      { member: 'a', peer: 'b', from: 0, to: RECONFIG_GUARD_MS },
      { member: 'a', peer: 'b', from: 200, to: 900 + RECONFIG_GUARD_MS },
      { member: 'a', peer: 'c', from: 950, to: undefined },
    ]);
  });

  it('when a peer became active at t, then a call from t + 4999 meets its guard and one from t + 5001 does not', () => {
    const guards = guardsOf([{ member: 'a', at: 1000, kind: 'peer-active', peer: 'b' }]);
    expect(guards).toEqual([{ member: 'a', peer: 'b', from: 1000, to: 1000 + RECONFIG_GUARD_MS }]);
    expect(meets(5999, 7000, guards)).toBe(true);
    expect(meets(6001, 7000, guards)).toBe(false);
    expect(meets(0, 999, guards)).toBe(false);
    expect(meets(0, 999, [{ from: 500, to: undefined }])).toBe(true);
  });
});
