import { Deadline } from '../../agent/lib/deadline';
import { ClusterProbe, learnerLooksReady, reaskSilent, reaskWithin, type MemberProbe } from '../../agent/membership/probe';
import type { Member, MemberStatus } from '../../agent/proto/types';

function member(id: string, isLearner = false, started = true): Member {
  return {
    id,
    name: started ? `etcd-${id}` : '',
    peerURLs: [`http://${id}:2380`],
    clientURLs: started ? [`http://${id}:2379`] : [],
    isLearner,
    started,
  };
}

function status(memberId: string, leaderId: string, raftTerm: number, raftIndex: number, raftAppliedIndex = raftIndex): MemberStatus {
  return {
    memberId,
    leaderId,
    raftTerm,
    raftIndex,
    raftAppliedIndex,
    dbSizeBytes: 1,
    dbSizeInUseBytes: 1,
    revision: 1,
    isLearner: false,
    version: '3.4.23',
    errors: [],
    latencyMs: 1,
  };
}

/** [id, isLearner, started, status as [leaderId, term, index, applied] or undefined (did not answer)] */
type Row = [string, boolean, boolean, [string, number, number, number] | undefined];

function probeOf(rows: Row[]): ClusterProbe {
  return new ClusterProbe(
    rows.map(([id, learner, started, s]): MemberProbe => {
      const m = member(id, learner, started);
      return { member: m, url: m.clientURLs[0], status: s === undefined ? undefined : status(id, ...s) };
    }),
  );
}

describe('ClusterProbe', () => {
  it.each<[string, Row[], number, number, string | undefined, string | undefined]>([
    [
      'three healthy voters',
      [
        ['a', false, true, ['a', 2, 10, 10]],
        ['b', false, true, ['a', 2, 10, 9]],
        ['c', false, true, ['a', 2, 9, 9]],
      ],
      3,
      3,
      'a',
      'b',
    ],
    [
      'a silent voter and a learner',
      [
        ['a', false, true, ['b', 3, 10, 10]],
        ['b', false, true, ['b', 3, 12, 12]],
        ['c', false, true, undefined],
        ['d', true, true, ['b', 3, 12, 12]],
      ],
      3,
      2,
      'b',
      'a',
    ],
    [
      'a stale view from an older term',
      [
        ['a', false, true, ['a', 2, 5, 5]],
        ['b', false, true, ['c', 4, 9, 9]],
        ['c', false, true, ['c', 4, 9, 9]],
      ],
      3,
      3,
      'c',
      'b',
    ],
    [
      'an unstarted voter (counted, never healthy)',
      [
        ['a', false, true, ['a', 2, 7, 7]],
        ['b', false, false, undefined],
      ],
      2,
      1,
      undefined,
      'a',
    ],
    [
      'a split view: one voter names itself in a higher term, a quorum names another',
      [
        ['a', false, true, ['a', 7, 9, 9]],
        ['b', false, true, ['c', 6, 12, 12]],
        ['c', false, true, ['c', 6, 12, 12]],
      ],
      3,
      3,
      'c',
      'b',
    ],
    [
      'nobody knowing a leader',
      [
        ['a', false, true, ['0', 2, 7, 7]],
        ['b', false, true, ['0', 2, 7, 7]],
      ],
      2,
      2,
      undefined,
      'a',
    ],
    [
      'nobody answering',
      [
        ['a', false, true, undefined],
        ['b', false, true, undefined],
      ],
      2,
      0,
      undefined,
      undefined,
    ],
  ])(
    'when the members are %s, then voters, healthy voters, leader and successor are read right',
    (_what, rows, voters, healthy, leader, successor) => {
      const probe = probeOf(rows);

      expect(probe.voters).toHaveLength(voters);
      expect(probe.healthyVoters).toBe(healthy);
      expect(probe.leader?.member.id).toBe(leader);
      expect(probe.mostUpToDate(leader)?.member.id).toBe(successor);
    },
  );

  it('when two voters have applied as much, then the successor is the one with the higher commit index, then the lower id', () => {
    const tied = probeOf([
      ['c', false, true, ['x', 2, 10, 10]],
      ['b', false, true, ['x', 2, 10, 10]],
      ['d', false, true, ['x', 2, 11, 10]],
    ]);

    expect(tied.mostUpToDate()?.member.id).toBe('d');
    expect(tied.mostUpToDate('d')?.member.id).toBe('b');
  });
});

describe('reaskSilent', () => {
  it.each<[string, Row[], string[], string[], string[]]>([
    // [case, first round, who answers the second, asked again, voters answering after]
    [
      'nobody silent: nothing asked again',
      [
        ['a', false, true, ['a', 2, 10, 10]],
        ['b', false, true, ['a', 2, 10, 10]],
      ],
      [],
      [],
      ['a', 'b'],
    ],
    [
      'a slow voter answers the second time',
      [
        ['a', false, true, ['a', 2, 10, 10]],
        ['b', false, true, undefined],
        ['c', false, true, undefined],
      ],
      ['b'],
      ['b', 'c'],
      ['a', 'b'],
    ],
    [
      'an unstarted member (no URL) is not asked',
      [
        ['a', false, true, ['a', 2, 10, 10]],
        ['u', true, false, undefined],
      ],
      ['u'],
      [],
      ['a'],
    ],
    ['still silent: stays silent', [['a', false, true, undefined]], [], ['a'], []],
  ])(
    'when %s, then only the silent members with a URL are asked again and their new answers replace the old',
    async (_case, rows, answering, askedAgain, after) => {
      const asked: string[] = [];
      const cluster = {
        memberStatus: async (url: string, timeoutMs: number): Promise<MemberStatus> => {
          const id = new URL(url).hostname;
          asked.push(id);
          expect(timeoutMs).toBe(1000);
          if (!answering.includes(id)) throw new Error('deadline exceeded');
          return status(id, 'a', 2, 10);
        },
      };

      const probe = await reaskSilent(cluster, probeOf(rows), 1000);

      expect(asked.sort()).toEqual(askedAgain);
      expect(
        probe.probes
          .filter((p) => !p.member.isLearner && p.status !== undefined)
          .map((p) => p.member.id)
          .sort(),
      ).toEqual(after);
      expect(probe.probes).toHaveLength(rows.length);
    },
  );
});

describe('reaskWithin', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it.each<[string, number, number[]]>([
    // [case, ms left of the deadline, timeouts the silent voter was asked again with]
    ['plenty of time is left: twice the Status timeout', 60_000, [1000]],
    ['less is left than twice the timeout: what is left', 300, [300]],
    ['the deadline has passed: nobody is asked again', 0, []],
  ])('when %s', async (_case, leftMs, timeouts) => {
    const asked: number[] = [];
    const cluster = {
      memberStatus: async (url: string, timeoutMs: number): Promise<MemberStatus> => {
        asked.push(timeoutMs);
        return status(new URL(url).hostname, 'a', 2, 10);
      },
    };
    const first = probeOf([
      ['a', false, true, ['a', 2, 10, 10]],
      ['b', false, true, undefined],
    ]);

    const probe = await reaskWithin(cluster, first, 500, Deadline.in(leftMs));

    expect(asked).toEqual(timeouts);
    expect(probe.isHealthy('b')).toBe(timeouts.length > 0);
  });
});

describe('Deadline.budget', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it.each<[string, number, number]>([
    // [case, ms left, budget asked for 500 ms]
    ['more is left than asked: what was asked', 60_000, 500],
    ['less is left: what is left', 200, 200],
    ['nothing is left: 1 ms, never 0 (no timeout at all to some clients)', 0, 1],
  ])('when %s', (_case, leftMs, budget) => {
    expect(Deadline.in(leftMs).budget(500)).toBe(budget);
  });
});

describe('learnerLooksReady', () => {
  it.each<[number, number, boolean]>([
    [100, 100, true],
    [90, 100, true],
    [89, 100, false],
    [0, 100, false],
    [0, 0, true],
    [1000, 990, true],
  ])('when the learner has committed %i of the leader’s %i, then ready is %s', (learner, leader, ready) => {
    expect(learnerLooksReady(status('l', 'x', 2, learner), status('x', 'x', 2, leader))).toBe(ready);
  });
});
