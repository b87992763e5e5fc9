import { aheadOf, compareAdvanced, mostAdvanced, Survivor } from '../../agent/recovery/candidate';
import { decideRecovery, normalizeClusterId, RecoveryDecision, RecoveryFacts, shownLossSeconds } from '../../agent/recovery/decision';
import { buildPlan } from '../../agent/recovery/plan';
import type { MemberLogState, RecoveryRecord } from '../../agent/proto/recovery';

const NOW = Date.parse('2026-12-01T12:00:00Z');
const MIN = 300;

function log(name: string, over: Partial<MemberLogState> = {}): MemberLogState {
  return {
    name,
    id: `id-${name}`,
    source: 'etcd',
    clusterId: 'c1',
    raftTerm: 4,
    committedIndex: 100,
    appliedIndex: 100,
    lastIndex: null,
    isLearner: false,
    errors: [],
    ...over,
  };
}

const lost = (name: string): MemberLogState =>
  log(name, { source: 'none', clusterId: null, raftTerm: null, committedIndex: null, appliedIndex: null, errors: ['etcd: refused'] });
const five = (): MemberLogState[] => [
  log('etcd-0', { committedIndex: 260 }),
  log('etcd-1', { source: 'data-dir', committedIndex: 62, appliedIndex: null }),
  lost('etcd-2'),
  lost('etcd-3'),
  lost('etcd-4'),
];
const noQuorum = { voters: 5, answering: 2, required: 3, hasQuorum: false };
const record: RecoveryRecord = {
  id: 'r1',
  clusterId: 'c1',
  from: { name: 'etcd-0', id: 'id-etcd-0', committedIndex: 260, raftTerm: 4 },
  removed: [],
  quorumLostSince: null,
  orderedAt: '2026-12-01T11:55:00Z',
  writableAt: '2026-12-01T11:56:00Z',
  force: false,
};

function facts(over: Partial<RecoveryFacts> = {}): RecoveryFacts {
  return {
    self: 'etcd-0',
    request: { from: 'etcd-0', clusterId: 'c1', force: false },
    nowMs: NOW,
    lostSinceMs: NOW - 400_000,
    minLossSeconds: MIN,
    quorum: noQuorum,
    members: five(),
    ...over,
  };
}

type Kind = RecoveryDecision['kind'];
type Code = Extract<RecoveryDecision, { kind: 'refuse' }>['code'] | '-';

describe('decideRecovery', () => {
  it.each<[string, Kind, Code, Partial<RecoveryFacts>]>([
    ['every gate holds', 'recover', '-', {}],
    ['no member list is known', 'refuse', 'unavailable', { quorum: null }],
    ['a quorum answers', 'refuse', 'unsafe', { quorum: { voters: 5, answering: 3, required: 3, hasQuorum: true } }],
    [
      'a quorum answers and keeps the record of this recovery (a replay)',
      'already-recovered',
      '-',
      { quorum: { voters: 1, answering: 1, required: 1, hasQuorum: true }, record },
    ],
    [
      'a quorum answers and keeps the record of a recovery from another member',
      'refuse',
      'unsafe',
      {
        quorum: { voters: 1, answering: 1, required: 1, hasQuorum: true },
        record,
        request: { from: 'etcd-1', clusterId: 'c1', force: false },
        self: 'etcd-1',
      },
    ],
    [
      'a quorum answers and keeps a record of another cluster id',
      'refuse',
      'unsafe',
      { quorum: { voters: 1, answering: 1, required: 1, hasQuorum: true }, record: { ...record, clusterId: 'c2' } },
    ],
    [
      'from is no member of the last list',
      'refuse',
      'not-found',
      { request: { from: 'etcd-9', clusterId: 'c1', force: false }, self: 'etcd-9' },
    ],
    ["the call is at another member's agent", 'refuse', 'bad-request', { self: 'etcd-1' }],
    [
      'the cluster id is not the one the members report',
      'refuse',
      'conflict',
      { request: { from: 'etcd-0', clusterId: 'c2', force: false } },
    ],
    [
      'the members report two cluster ids',
      'refuse',
      'conflict',
      { members: [log('etcd-0'), log('etcd-1', { clusterId: 'c2' }), lost('etcd-2')] },
    ],
    ['no member reports its cluster id', 'refuse', 'unavailable', { members: [lost('etcd-0'), lost('etcd-1'), lost('etcd-2')] }],
    ['this agent has not seen the loss', 'refuse', 'unsafe', { lostSinceMs: undefined }],
    ['the loss is shorter than the minimum', 'refuse', 'unsafe', { lostSinceMs: NOW - 299_000 }],
    ['the loss is exactly the minimum', 'recover', '-', { lostSinceMs: NOW - 300_000 }],
    ["from's log cannot be read", 'refuse', 'unavailable', { members: [lost('etcd-0'), log('etcd-1'), lost('etcd-2')] }],
    [
      'from is a learner',
      'refuse',
      'unsafe',
      { members: [log('etcd-0', { isLearner: true }), log('etcd-1', { committedIndex: 50 }), lost('etcd-2')] },
    ],
    [
      'another survivor knows a higher commit index',
      'refuse',
      'unsafe',
      { members: [log('etcd-0', { committedIndex: 62 }), log('etcd-1', { committedIndex: 260 }), lost('etcd-2')] },
    ],
    [
      'another survivor knows a higher commit index, and force is given',
      'recover',
      '-',
      {
        request: { from: 'etcd-0', clusterId: 'c1', force: true },
        members: [log('etcd-0', { committedIndex: 62 }), log('etcd-1', { committedIndex: 260 }), lost('etcd-2')],
      },
    ],
    [
      'a learner knows a higher commit index than every voter',
      'refuse',
      'unsafe',
      { members: [log('etcd-0'), log('etcd-1', { isLearner: true, committedIndex: 101 }), lost('etcd-2')] },
    ],
    [
      'another survivor is at the same commit index with a higher term (the same entries)',
      'recover',
      '-',
      { members: [log('etcd-0', { source: 'data-dir', appliedIndex: null }), log('etcd-1', { raftTerm: 9 }), lost('etcd-2')] },
    ],
    [
      'the cluster id is asked with 0x, upper case and leading zeros',
      'recover',
      '-',
      { request: { from: 'etcd-0', clusterId: '0x00C1', force: false } },
    ],
  ])('when %s, then it answers %s %s', (_story, kind, code, over) => {
    const decision = decideRecovery(facts(over));
    expect(decision.kind).toBe(kind);
    if (code !== '-') expect(decision.kind === 'refuse' && decision.code).toBe(code);
  });

  it('when it recovers, then every other member is removed: the silent ones as lost, the others as behind', () => {
    expect(decideRecovery(facts())).toMatchObject({
      kind: 'recover',
      from: { name: 'etcd-0', committedIndex: 260 },
      clusterId: 'c1',
      forced: false,
      removed: [
        { name: 'etcd-1', kind: 'behind', committedIndex: 62 },
        { name: 'etcd-2', kind: 'lost', committedIndex: null },
        { name: 'etcd-3', kind: 'lost' },
        { name: 'etcd-4', kind: 'lost' },
      ],
    });
  });

  it('when it refuses the less advanced survivor, then it says what would be dropped and whom to recover from', () => {
    const d = decideRecovery(facts({ self: 'etcd-1', request: { from: 'etcd-1', clusterId: 'c1', force: false } }));
    expect(d).toMatchObject({
      kind: 'refuse',
      code: 'unsafe',
      details: { entriesDropped: 198, mostAdvanced: { name: 'etcd-0', committedIndex: 260 }, from: { name: 'etcd-1', committedIndex: 62 } },
    });
    expect(d.kind === 'refuse' && d.message).toContain('recover from etcd-0, or add "force": true');
  });

  it('when the loss is too short, then the refusal carries the figures', () => {
    expect(decideRecovery(facts({ lostSinceMs: NOW - 12_300 }))).toMatchObject({
      kind: 'refuse',
      details: { quorumLostForSeconds: 12.3, minLossSeconds: MIN, quorum: { voters: 5, answering: 2, required: 3 } },
    });
  });

  it.each([
    [12_300, 12.3],
    [2_960, 2.9],
    [2_999, 2.9],
    [3_000, 3],
    [0, 0],
  ])(
    'when the quorum was lost %j ms ago, then the figure shown is %j s, rounded down (never reaching the minimum before the rule does)',
    (ms, shown) => {
      expect(shownLossSeconds(NOW, NOW - ms)).toBe(shown);
    },
  );

  it('when the loss is 40 ms short of the minimum, then the refusal shows a figure below it', () => {
    const d = decideRecovery(facts({ lostSinceMs: NOW - (MIN * 1000 - 40) }));
    expect(d).toMatchObject({ kind: 'refuse', code: 'unsafe', details: { quorumLostForSeconds: MIN - 0.1 } });
    expect(d.kind === 'refuse' && d.message).toContain(`lost for ${(MIN - 0.1).toFixed(1)} s`);
  });

  it.each([
    ['c1', 'c1'],
    ['0x00C1', 'c1'],
    [' 0005 ', '5'],
    ['ffffffffffffffff', 'ffffffffffffffff'],
    ['xyz', 'xyz'],
  ])('when the cluster id %j is normalised, then it reads %j', (given, expected) => {
    expect(normalizeClusterId(given)).toBe(expected);
  });
});

describe('the candidate rule', () => {
  const s = (name: string, committedIndex: number, raftTerm: number): Survivor => ({ name, committedIndex, raftTerm });

  it.each<[string, Survivor[], string | undefined]>([
    ['nobody survives', [], undefined],
    ['the higher commit index wins, whatever the terms', [s('a', 10, 9), s('b', 11, 2)], 'b'],
    ['at the same commit index the higher term wins', [s('a', 10, 2), s('b', 10, 3)], 'b'],
    ['at the same commit index and term the name decides', [s('b', 10, 3), s('a', 10, 3)], 'a'],
  ])('when %s, then the most advanced is %s', (_story, survivors, expected) => {
    expect(mostAdvanced(survivors)?.name).toBe(expected);
    expect(mostAdvanced([...survivors].reverse())?.name).toBe(expected);
  });

  it('when members are ahead of one, then aheadOf lists exactly those with a higher commit index, most advanced first', () => {
    const all = [s('a', 10, 2), s('b', 12, 2), s('c', 10, 9), s('d', 15, 1)];
    expect(aheadOf(all[0], all).map((x) => x.name)).toEqual(['d', 'b']);
    expect(aheadOf(all[3], all)).toEqual([]);
    expect([...all].sort(compareAdvanced).map((x) => x.name)).toEqual(['d', 'b', 'c', 'a']);
  });
});

describe('buildPlan', () => {
  const agentOf = (name: string): string => `http://${name}.svc:3501`;

  it('when the loss has lasted, then it names the most advanced voter, the call to make, and what a recovery drops', () => {
    const plan = buildPlan({ ...facts(), agentOf });
    expect(plan).toMatchObject({
      needed: true,
      possible: true,
      clusterId: 'c1',
      quorumLostForSeconds: 400,
      recoverFrom: { name: 'etcd-0', committedIndex: 260 },
      keeps: { committedIndex: 260 },
      drops: {
        membersRemoved: ['etcd-1', 'etcd-2', 'etcd-3', 'etcd-4'],
        lost: ['etcd-2', 'etcd-3', 'etcd-4'],
        behind: [{ name: 'etcd-1', committedIndex: 62, entriesBehind: 198 }],
      },
      call: { agent: 'http://etcd-0.svc:3501', body: { from: 'etcd-0', clusterId: 'c1' } },
    });
  });

  it.each<[string, Partial<RecoveryFacts>, boolean, boolean, string]>([
    ['the loss is still shorter than the minimum', { lostSinceMs: NOW - 10_000 }, true, true, 'less than 300 s'],
    ['a quorum answers', { quorum: { voters: 5, answering: 4, required: 3, hasQuorum: true } }, false, false, 'nothing to recover'],
    ['no member list is known', { quorum: null }, false, false, 'no member list'],
    ['no voter can be read', { members: [lost('etcd-0'), lost('etcd-1'), lost('etcd-2')] }, true, false, 'nothing to recover from'],
    [
      'a learner is ahead of every voter',
      { members: [log('etcd-0'), log('etcd-1', { isLearner: true, committedIndex: 120 }), lost('etcd-2')] },
      true,
      false,
      'etcd-1 is a learner',
    ],
    [
      'the members report two cluster ids',
      { members: [log('etcd-0'), log('etcd-1', { clusterId: 'c2' }), lost('etcd-2')] },
      true,
      false,
      'two clusters',
    ],
  ])('when %s, then needed is %s, possible %s, and the reason says why', (_story, over, needed, possible, reason) => {
    const plan = buildPlan({ ...facts(over), agentOf });
    expect({ needed: plan.needed, possible: plan.possible }).toEqual({ needed, possible });
    expect(plan.reason).toContain(reason);
  });

  it('when the plan is read at any agent, then it names the same member (the plan does not depend on who asks)', () => {
    expect(buildPlan({ ...facts({ self: 'etcd-1' }), agentOf }).recoverFrom?.name).toBe('etcd-0');
  });
});
