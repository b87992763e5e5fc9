import {
  decideDefrag,
  fragmentationOf,
  skippedMembers,
  type DefragDecision,
  type DefragInput,
  type DefragOptions,
} from '../../agent/maintenance/defrag-decision';
import type { MetricsAnswer } from '../../agent/etcd/member-metrics';
import { ClusterProbe, type MemberProbe } from '../../agent/membership/probe';
import { isAgentError } from '../../agent/proto/errors';
import type { Member } from '../../agent/proto/types';
import { learner, member } from '../helpers/membership-fixtures';

const MB = 1_000_000;

/**
 * What one member says: its database (size, in use, in MB), whom it names leader, its applied index
 * (committed 100, unless told), or 'silent' (no Status answer).
 */
interface Says {
  db: [size: number, inUse: number];
  leader?: string;
  applied?: number;
  committed?: number;
}

function probeOf(members: Member[], says: Record<string, Says | 'silent'>, leader = 'a'): ClusterProbe {
  return new ClusterProbe(
    members.map((m): MemberProbe => {
      const s = says[m.id];
      const url = m.clientURLs[0];
      if (s === undefined || s === 'silent') return { member: m, url, error: 'no answer within 500 ms' };
      const committed = s.committed ?? 100;
      return {
        member: m,
        url,
        status: {
          memberId: m.id,
          leaderId: s.leader ?? leader,
          raftTerm: 2,
          raftIndex: committed,
          raftAppliedIndex: s.applied ?? committed,
          dbSizeBytes: s.db[0] * MB,
          dbSizeInUseBytes: s.db[1] * MB,
          revision: 500,
          isLearner: m.isLearner,
          version: '3.6.16',
          errors: [],
          latencyMs: 1,
        },
      };
    }),
  );
}

const a = member('a');
const b = member('b');
const c = member('c');
const three = [a, b, c];

const OPTIONS: DefragOptions = { minFragmentation: 0.45, minDbSizeBytes: 10 * MB, force: false, quotaMargin: 0.1, compact: false };
/** Each member's own gauges: not defragmenting, a 100 MB quota. */
const quiet = (members: Member[], quotaMB = 100): Map<string, MetricsAnswer> =>
  new Map(members.map((m) => [m.id, { defragmenting: false, quotaBytes: quotaMB * MB }]));

interface Case {
  members?: Member[];
  says: Record<string, Says | 'silent'>;
  leader?: string;
  metrics?: Map<string, MetricsAnswer>;
  noSpace?: boolean;
  options?: Partial<DefragOptions>;
  done?: Record<string, number>;
  compacted?: boolean;
  /** This run's compaction marks, by member: finished compactions before it, and the commit count when it was seen finished. */
  settling?: Record<string, readonly [before: number, commitsAtFinish?: number]>;
  leaderMoves?: number;
}

function input(k: Case): DefragInput {
  const members = k.members ?? three;
  return {
    probe: probeOf(members, k.says, k.leader),
    metrics: k.metrics ?? quiet(members),
    noSpace: k.noSpace ?? false,
    options: { ...OPTIONS, ...k.options },
    progress: {
      compacted: k.compacted ?? false,
      settling: new Map(
        Object.entries(k.settling ?? {}).map(([id, [before, atFinish]]) => [
          id,
          { compactionsBefore: before, ...(atFinish === undefined ? {} : { commitsAtFinish: atFinish }) },
        ]),
      ),
      done: new Map(Object.entries(k.done ?? {}).map(([id, catchUpIndex]) => [id, { catchUpIndex }])),
      leaderMoves: k.leaderMoves ?? 0,
    },
  };
}

/** A decision (or the error it threw) in one line. */
function said(k: Case): string {
  let d: DefragDecision;
  try {
    d = decideDefrag(input(k));
  } catch (err) {
    if (isAgentError(err)) return `throws ${err.code} ${String(err.details?.reason ?? '')}`.trim();
    throw err;
  }
  switch (d.kind) {
    case 'wait':
      if (d.reason.kind !== 'compacting') return `wait ${d.member.id}`;
      return `wait ${d.member.id}: compacting${d.reason.commitsLeft === undefined ? '' : `, ${d.reason.commitsLeft} commit${d.reason.commitsLeft === 1 ? '' : 's'} left`}`;
    case 'move-leader':
      return `move-leader ${d.from.member.id}→${d.to.member.id}`;
    case 'defragment':
      return `defragment ${d.target.member.id}${d.wasLeader ? ' (leader)' : ''}`;
    case 'done':
      return `done ${d.outcome}`;
    default:
      return d.kind;
  }
}

// Fragmented: 100 MB file, 20 MB in use (80 %). Tidy: 30 MB file, 29 MB in use (3 %).
const frag: Says = { db: [100, 20] };
const tidy: Says = { db: [30, 29] };
const allFrag = { a: frag, b: frag, c: frag };

/** Each member's gauges with its counts of finished compactions and backend commits. */
const counting = (counts: Record<string, [compactions: number, commits: number]>): Map<string, MetricsAnswer> =>
  new Map(
    three.map((m) => {
      const count = counts[m.id];
      return [
        m.id,
        { defragmenting: false, quotaBytes: 100 * MB, ...(count === undefined ? {} : { compactions: count[0], commits: count[1] }) },
      ];
    }),
  );
/**
 * Right after this run's compaction, as the failure looked: it finished on the leader a, whose Status
 * shows the freed space; the followers still count the dropped history as in use and look tidy.
 */
const afterCompaction = { a: frag, b: tidy, c: tidy };
const compactedAt3 = { compacted: true, options: { compact: true }, settling: { a: [3, 40], b: [3], c: [3] } } as const;

describe('decideDefrag: what a defragmentation run does next', () => {
  it.each<[string, Case, string]>([
    // Order: followers first by name, the leader last after leadership moved to a member done.
    ['every member is fragmented, a leads', { says: allFrag }, 'defragment b'],
    ['b is done', { says: { ...allFrag, b: tidy }, done: { b: 100 } }, 'defragment c'],
    ['b and c are done, a leads', { says: { a: frag, b: tidy, c: tidy }, done: { b: 100, c: 100 } }, 'move-leader a→b'],
    [
      'b and c are done and b is ahead of c',
      { says: { a: frag, b: { ...tidy, applied: 100 }, c: { ...tidy, applied: 99 } }, done: { b: 99, c: 99 } },
      'move-leader a→b',
    ],
    [
      'leadership moved to b; a, the former leader, is now a follower',
      { says: { a: frag, b: tidy, c: tidy }, leader: 'b', done: { b: 100, c: 100 }, leaderMoves: 1 },
      'defragment a',
    ],
    ['all three are done', { says: { a: tidy, b: tidy, c: tidy }, leader: 'b', done: { a: 100, b: 100, c: 100 } }, 'done defragmented'],
    ['nothing is over the thresholds', { says: { a: tidy, b: tidy, c: tidy } }, 'done nothing-to-do'],
    [
      'only the leader is fragmented: leadership goes to a follower that needs nothing',
      { says: { a: frag, b: tidy, c: tidy } },
      'move-leader a→b',
    ],
    [
      'a fragmented database below the size threshold',
      { says: { a: { db: [5, 1] }, b: { db: [5, 1] }, c: { db: [5, 1] } } },
      'done nothing-to-do',
    ],
    [
      'the size threshold is lowered by the call',
      { says: { a: { db: [5, 1] }, b: { db: [5, 1] }, c: { db: [5, 1] } }, options: { minDbSizeBytes: 0 } },
      'defragment b',
    ],
    [
      'the fragmentation threshold is lowered by the call',
      { says: { a: tidy, b: { db: [30, 27] }, c: tidy }, options: { minFragmentation: 0.05 } },
      'defragment b',
    ],

    // Crash safety: what the members say decides, whatever happened before.
    [
      'a member is being defragmented now (an earlier run that outlived its agent)',
      {
        says: { a: frag, b: frag, c: 'silent' },
        metrics: new Map([...quiet(three), ['c', { defragmenting: true, quotaBytes: 100 * MB }]]),
      },
      'wait c',
    ],
    [
      'the member this run defragmented has not applied its backlog yet',
      { says: { a: frag, b: { ...tidy, applied: 80 }, c: frag }, done: { b: 100 } },
      'wait b',
    ],
    [
      'a restarted run finds b already done (below the threshold) and goes on with c',
      { says: { a: frag, b: tidy, c: frag } },
      'defragment c',
    ],

    // Health gate: touch nothing.
    ['a follower does not answer', { says: { a: frag, b: frag, c: 'silent' } }, 'throws unsafe unhealthy'],
    [
      'no leader a quorum names',
      { says: { a: { ...frag, leader: '0' }, b: { ...frag, leader: '0' }, c: { ...frag, leader: '0' } } },
      'throws unsafe unhealthy',
    ],
    ['a follower names another leader', { says: { a: frag, b: { ...frag, leader: 'c' }, c: frag } }, 'throws unsafe unhealthy'],
    [
      'a follower lags by more than etcd allows',
      {
        says: { a: { ...frag, committed: 20_000 }, b: { ...frag, committed: 20_000, applied: 10_000 }, c: { ...frag, committed: 20_000 } },
      },
      'throws unsafe unhealthy',
    ],

    // Quorum.
    ['one member, not forced', { members: [a], says: { a: frag } }, 'throws unsafe single-member'],
    ['one member, forced: defragmented in place', { members: [a], says: { a: frag }, options: { force: true } }, 'defragment a (leader)'],
    ['two members, not forced', { members: [a, b], says: { a: frag, b: frag } }, 'throws unsafe quorum'],
    ['two members, forced', { members: [a, b], says: { a: frag, b: frag }, options: { force: true } }, 'defragment b'],
    ['a learner beside three voters', { members: [a, b, c, learner('d')], says: { ...allFrag, d: frag } }, 'defragment b'],
    [
      'only the learner is fragmented',
      { members: [a, b, c, learner('d')], says: { a: tidy, b: tidy, c: tidy, d: frag } },
      'done nothing-to-do',
    ],

    // Compaction first.
    ['compaction asked, not done yet', { says: allFrag, options: { compact: true } }, 'compact'],
    ['compaction asked and done', { says: allFrag, options: { compact: true }, compacted: true }, 'defragment b'],
    // Compaction finishes on every voter, and shows in its in-use size, before anyone is to do.
    [
      'the followers have not finished the compaction: the leader is not done first',
      { says: afterCompaction, ...compactedAt3, metrics: counting({ a: [4, 43], b: [3, 30], c: [3, 31] }) },
      'wait b: compacting',
    ],
    [
      'b finished it this look, c has not',
      { says: afterCompaction, ...compactedAt3, metrics: counting({ a: [4, 43], b: [4, 30], c: [3, 31] }) },
      'wait b: compacting, 3 commits left',
    ],
    [
      'b finished it and committed once since',
      {
        says: afterCompaction,
        ...compactedAt3,
        settling: { ...compactedAt3.settling, b: [3, 30] },
        metrics: counting({ a: [4, 43], b: [4, 31], c: [3, 31] }),
      },
      'wait b: compacting, 2 commits left',
    ],
    [
      'b finished it and committed twice since: the third proves its in-use size was taken after',
      {
        says: afterCompaction,
        ...compactedAt3,
        settling: { ...compactedAt3.settling, b: [3, 30] },
        metrics: counting({ a: [4, 43], b: [4, 32], c: [3, 31] }),
      },
      'wait b: compacting, 1 commit left',
    ],
    [
      'b has settled, c has not finished',
      {
        says: afterCompaction,
        ...compactedAt3,
        settling: { ...compactedAt3.settling, b: [3, 30] },
        metrics: counting({ a: [4, 43], b: [4, 33], c: [3, 31] }),
      },
      'wait c: compacting',
    ],
    [
      'every voter has settled and shows it: the followers first',
      {
        says: allFrag,
        ...compactedAt3,
        settling: { a: [3, 40], b: [3, 30], c: [3, 31] },
        metrics: counting({ a: [4, 43], b: [4, 33], c: [5, 34] }),
      },
      'defragment b',
    ],
    [
      'every voter has settled and only the leader is fragmented',
      {
        says: afterCompaction,
        ...compactedAt3,
        settling: { a: [3, 40], b: [3, 30], c: [3, 31] },
        metrics: counting({ a: [4, 43], b: [4, 33], c: [4, 34] }),
      },
      'move-leader a→b',
    ],
    [
      "b's gauges cannot be read: decided from its Status",
      {
        says: afterCompaction,
        ...compactedAt3,
        settling: { a: [3, 40], b: [3], c: [3, 31] },
        metrics: new Map<string, MetricsAnswer>([...counting({ a: [4, 43], c: [4, 34] }), ['b', { error: 'HTTP 503' }]]),
      },
      'move-leader a→b',
    ],
    [
      'b does not report the counters: decided from its Status',
      {
        says: afterCompaction,
        ...compactedAt3,
        settling: { a: [3, 40], b: [3], c: [3, 31] },
        metrics: counting({ a: [4, 43], c: [4, 34] }),
      },
      'move-leader a→b',
    ],
    [
      'b restarted (its counters went back): decided from its Status',
      {
        says: afterCompaction,
        ...compactedAt3,
        settling: { a: [3, 40], b: [3], c: [3, 31] },
        metrics: counting({ a: [4, 43], b: [0, 2], c: [4, 34] }),
      },
      'move-leader a→b',
    ],
    [
      'no marks (the revision was compacted already): nothing of this run to wait for',
      { says: afterCompaction, ...compactedAt3, settling: {}, metrics: counting({ a: [3, 42], b: [3, 30], c: [3, 31] }) },
      'move-leader a→b',
    ],
    [
      'NOSPACE: no wait for the compaction, a voter over its limit is to do anyway',
      {
        noSpace: true,
        says: { a: { db: [99, 98] }, b: { db: [99, 98] }, c: { db: [99, 98] } },
        ...compactedAt3,
        metrics: counting({ a: [4, 43], b: [3, 30], c: [3, 31] }),
      },
      'defragment b',
    ],
    [
      'NOSPACE disarmed, every voter done by this run: no wait for the commits NOSPACE held back',
      {
        says: { a: { db: [40, 39] }, b: { db: [40, 39] }, c: { db: [40, 39] } },
        leader: 'b',
        done: { a: 100, b: 100, c: 100 },
        ...compactedAt3,
        settling: { a: [3, 40], b: [3, 30], c: [3, 31] },
        metrics: counting({ a: [4, 40], b: [4, 30], c: [4, 31] }),
      },
      'done defragmented',
    ],
    [
      'a learner has not finished the compaction: not waited for',
      {
        members: [a, b, c, learner('d')],
        says: { ...allFrag, d: frag },
        ...compactedAt3,
        settling: { a: [3, 40], b: [3, 30], c: [3, 31], d: [3] },
        metrics: new Map<string, MetricsAnswer>([
          ...counting({ a: [4, 43], b: [4, 33], c: [4, 34] }),
          ['d', { defragmenting: false, compactions: 3, commits: 5 }],
        ]),
      },
      'defragment b',
    ],
    [
      'compaction asked but a voter is silent',
      { says: { a: frag, b: frag, c: 'silent' }, options: { compact: true } },
      'throws unsafe unhealthy',
    ],

    // NOSPACE: a 100 MB quota, 10 % margin → 90 MB limit.
    [
      'NOSPACE, all over the limit though little fragmented (3.4 after a compaction)',
      { noSpace: true, says: { a: { db: [99, 98] }, b: { db: [99, 98] }, c: { db: [99, 98] } } },
      'defragment b',
    ],
    [
      'NOSPACE, all done and under the limit',
      {
        noSpace: true,
        says: { a: { db: [40, 39] }, b: { db: [40, 39] }, c: { db: [40, 39] } },
        leader: 'b',
        done: { a: 100, b: 100, c: 100 },
      },
      'disarm',
    ],
    ['NOSPACE, nothing to do and all under the limit already', { noSpace: true, says: { a: tidy, b: tidy, c: tidy } }, 'disarm'],
    [
      'NOSPACE, all done but the data still fills the quota',
      {
        noSpace: true,
        says: { a: { db: [95, 94] }, b: { db: [95, 94] }, c: { db: [95, 94] } },
        leader: 'b',
        done: { a: 100, b: 100, c: 100 },
      },
      'throws unavailable data-fills-quota',
    ],
    [
      'NOSPACE, all done, one quota unknown',
      {
        noSpace: true,
        says: { a: tidy, b: tidy, c: tidy },
        done: { a: 100, b: 100, c: 100 },
        metrics: new Map<string, MetricsAnswer>([...quiet(three), ['c', { error: 'HTTP 503' }]]),
      },
      'throws unavailable quota-unknown',
    ],
    [
      'NOSPACE with a member silent: nothing is touched',
      { noSpace: true, says: { a: { db: [99, 50] }, b: { db: [99, 50] }, c: 'silent' } },
      'throws unsafe unhealthy',
    ],
    [
      'NOSPACE, compaction first',
      { noSpace: true, says: { a: { db: [99, 98] }, b: { db: [99, 98] }, c: { db: [99, 98] } }, options: { compact: true } },
      'compact',
    ],

    // Leadership moves are bounded.
    [
      'the leader is still to do after as many moves as voters',
      { says: { a: frag, b: tidy, c: tidy }, done: { b: 100, c: 100 }, leaderMoves: 3 },
      'throws unavailable',
    ],
  ])('when %s, then: %s', (_what, k, decision) => {
    expect(said(k)).toBe(decision);
  });

  it('when the cluster is unhealthy, then the refusal carries the figures of every voter', () => {
    let refusal: unknown;
    try {
      decideDefrag(input({ says: { a: frag, b: frag, c: 'silent' } }));
    } catch (err) {
      refusal = err;
    }
    expect((refusal as Error).message).toContain('etcd-c (c) did not answer its status call');
    expect(refusal).toMatchObject({
      code: 'unsafe',
      details: {
        reason: 'unhealthy',
        voters: 3,
        healthyVoters: 2,
        required: 2,
        members: [
          { name: 'etcd-a', answered: true, dbSizeBytes: 100 * MB, dbSizeInUseBytes: 20 * MB, fragmentation: 0.8 },
          { name: 'etcd-b', answered: true },
          { name: 'etcd-c', answered: false },
        ],
      },
    });
  });

  it('when a one-member cluster is refused, then the message says why and that force does it', () => {
    expect(() => decideDefrag(input({ members: [a], says: { a: frag } }))).toThrow(/only member.*force: true defragments it anyway/);
  });

  it.each<[string, number, number, number]>([
    ['OpenShift’s measure', 100, 40, 0.6],
    ['nothing free', 100, 100, 0],
    ['an empty database', 0, 0, 0],
    ['in use above the size (a moment between two reads)', 100, 101, 0],
  ])('when fragmentation is measured for %s, then (size − in use) / size', (_what, size, inUse, expected) => {
    expect(fragmentationOf({ dbSizeBytes: size, dbSizeInUseBytes: inUse })).toBeCloseTo(expected);
  });

  it('when a run is done, then the members it left alone are listed with why', () => {
    const skipped = skippedMembers(
      input({ members: [a, b, c, learner('d')], says: { a: tidy, b: { db: [5, 1] }, c: tidy, d: tidy }, done: { c: 100 } }),
    );
    expect(skipped).toEqual([
      { id: 'a', name: 'etcd-a', dbSizeBytes: 30 * MB, dbSizeInUseBytes: 29 * MB, reason: 'fragmentation 3.3 % is below 45 %' },
      { id: 'b', name: 'etcd-b', dbSizeBytes: 5 * MB, dbSizeInUseBytes: 1 * MB, reason: 'database 5 MB is below 10 MB' },
      { id: 'd', name: 'etcd-d', reason: expect.stringContaining('a learner') },
    ]);
  });
});
