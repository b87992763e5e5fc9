import { classify, withExpected } from '../../agent/health/classify';
import { classifyLocal, LEARNER_NOT_READY } from '../../agent/health/classify-local';
import { noRoleError, readRole, type RoleReading } from '../../agent/health/role';
import type { HealthStatus, ObservedFacts, StatusProbe } from '../../agent/health/types';
import type { Alarm } from '../../agent/etcd/wire';
import { isLearnerInSync } from '../../agent/membership/quorum';
import type { Member, MemberStatus, OperationRecord } from '../../agent/proto/types';

/** A started voter `etcd-<n>` with id `a<n>`. */
function member(n: number, over: Partial<Member> = {}): Member {
  return {
    id: `a${n}`,
    name: `etcd-${n}`,
    peerURLs: [`http://10.0.0.${n}:2380`],
    clientURLs: [`http://10.0.0.${n}:2379`],
    isLearner: false,
    started: true,
    ...over,
  };
}

function learner(n: number): Member {
  return member(n, { isLearner: true });
}

/** Added with MemberAdd, never started: no name, no client URL. */
function unstarted(n: number, isLearner = false): Member {
  return member(n, { name: '', clientURLs: [], started: false, isLearner });
}

/** What a member answers, or why it did not (a string). */
type Answer = Partial<MemberStatus> | string;

/** An observation of `members` where member i answered `answers[i]` (default: all agree on a0 as leader). */
function facts(
  members: Member[],
  answers: Record<string, Answer> = {},
  more: Partial<ObservedFacts> & { fresh?: boolean } = {},
): ObservedFacts {
  const probes: StatusProbe[] = members
    .filter((m) => m.clientURLs.length > 0)
    .map((m) => {
      const answer = answers[m.id] ?? {};
      const url = m.clientURLs[0];
      if (typeof answer === 'string') return { url, error: answer };
      return { url, status: { ...status(m), ...answer } };
    });
  const { fresh = true, ...rest } = more;
  return { memberList: { members, fresh, readAt: '2026-11-29T12:00:00.000Z' }, probes, alarms: [], ...rest };
}

function status(m: Member): MemberStatus {
  return {
    memberId: m.id,
    leaderId: 'a0',
    raftTerm: 2,
    raftIndex: 1000,
    raftAppliedIndex: 1000,
    dbSizeBytes: 20480,
    dbSizeInUseBytes: 16384,
    revision: 7,
    isLearner: m.isLearner,
    version: '3.4.23',
    errors: [],
    latencyMs: 1.2,
  };
}

const three = [member(0), member(1), member(2)];
const five = [member(0), member(1), member(2), member(3), member(4)];
const down = 'no answer within 500 ms';

describe('classify: the contract table', () => {
  it.each<[string, HealthStatus, ObservedFacts, { voters: number; healthyVoters: number; hasQuorum: boolean; faultTolerance: number }]>([
    // healthy: every voter reachable, one leader all reachable members agree on, no alarm
    ['three voters answer and agree', 'healthy', facts(three), { voters: 3, healthyVoters: 3, hasQuorum: true, faultTolerance: 1 }],
    ['a single voter answers', 'healthy', facts([member(0)]), { voters: 1, healthyVoters: 1, hasQuorum: true, faultTolerance: 0 }],
    ['five voters answer and agree', 'healthy', facts(five), { voters: 5, healthyVoters: 5, hasQuorum: true, faultTolerance: 2 }],
    [
      'a learner in sync sits beside three voters',
      'healthy',
      facts([...three, learner(3)], { a3: { raftIndex: 950 } }),
      { voters: 3, healthyVoters: 3, hasQuorum: true, faultTolerance: 1 },
    ],
    // degraded: quorum held and a leader, but a member unreachable, lagging, or an alarm raised
    [
      'one follower of three does not answer',
      'degraded',
      facts(three, { a2: down }),
      { voters: 3, healthyVoters: 2, hasQuorum: true, faultTolerance: 0 },
    ],
    [
      'the leader does not answer but a quorum still follows it',
      'degraded',
      facts(three, { a0: down }),
      { voters: 3, healthyVoters: 2, hasQuorum: true, faultTolerance: 0 },
    ],
    [
      'two of five do not answer',
      'degraded',
      facts(five, { a3: down, a4: down }),
      { voters: 5, healthyVoters: 3, hasQuorum: true, faultTolerance: 0 },
    ],
    [
      'a follower sees no leader (split view)',
      'degraded',
      facts(three, { a2: { leaderId: '0', errors: ['etcdserver: no leader'] } }),
      { voters: 3, healthyVoters: 2, hasQuorum: true, faultTolerance: 0 },
    ],
    [
      'a follower names another leader (split view)',
      'degraded',
      facts(three, { a2: { leaderId: 'a2', raftTerm: 3 } }),
      { voters: 3, healthyVoters: 2, hasQuorum: true, faultTolerance: 0 },
    ],
    [
      'a learner lags the leader',
      'degraded',
      facts([...three, learner(3)], { a3: { raftIndex: 100 } }),
      { voters: 3, healthyVoters: 3, hasQuorum: true, faultTolerance: 1 },
    ],
    [
      'a learner does not answer',
      'degraded',
      facts([...three, learner(3)], { a3: down }),
      { voters: 3, healthyVoters: 3, hasQuorum: true, faultTolerance: 1 },
    ],
    [
      'a learner was added but has not started',
      'degraded',
      facts([...three, unstarted(3, true)]),
      { voters: 3, healthyVoters: 3, hasQuorum: true, faultTolerance: 1 },
    ],
    [
      'a voter was added but has not started',
      'degraded',
      facts([...three, unstarted(3)]),
      { voters: 4, healthyVoters: 3, hasQuorum: true, faultTolerance: 0 },
    ],
    [
      'a voter applies far behind the leader',
      'degraded',
      facts(three, { a0: { raftIndex: 7000 }, a1: { raftIndex: 7000, raftAppliedIndex: 1000 } }),
      { voters: 3, healthyVoters: 3, hasQuorum: true, faultTolerance: 1 },
    ],
    [
      'the alarm list has NOSPACE',
      'degraded',
      facts(three, {}, { alarms: [{ memberId: 'a1', alarm: 'NOSPACE' }] }),
      { voters: 3, healthyVoters: 3, hasQuorum: true, faultTolerance: 1 },
    ],
    [
      'the alarm list has CORRUPT',
      'degraded',
      facts(three, {}, { alarms: [{ memberId: 'a1', alarm: 'CORRUPT' }] }),
      { voters: 3, healthyVoters: 3, hasQuorum: true, faultTolerance: 1 },
    ],
    // Status errors are etcd's words (3.4–3.6 `memberID:161 alarm:CORRUPT `, 3.7 protobuf text): never parsed, but not healthy.
    [
      'a member reports an error in its status (3.7 wording)',
      'degraded',
      facts(three, { a1: { errors: ['member_id:161 alarm:CORRUPT'] } }),
      { voters: 3, healthyVoters: 3, hasQuorum: true, faultTolerance: 1 },
    ],
    [
      'the member list could not be read now, but a quorum of the last one answers',
      'degraded',
      facts(three, {}, { fresh: false, memberListError: 'etcd is unreachable' }),
      { voters: 3, healthyVoters: 3, hasQuorum: true, faultTolerance: 1 },
    ],
    // unavailable: no quorum of reachable voters, no leader, or no endpoint answered
    [
      'no endpoint answers',
      'unavailable',
      facts(three, { a0: down, a1: down, a2: down }),
      { voters: 3, healthyVoters: 0, hasQuorum: false, faultTolerance: 0 },
    ],
    [
      'two of three do not answer',
      'unavailable',
      facts(three, { a0: down, a1: down, a2: { leaderId: '0' } }),
      { voters: 3, healthyVoters: 0, hasQuorum: false, faultTolerance: 0 },
    ],
    [
      'two of three are gone and the third still names the old leader',
      'unavailable',
      facts(three, { a0: down, a1: down }),
      { voters: 3, healthyVoters: 1, hasQuorum: false, faultTolerance: 0 },
    ],
    [
      'all answer but none knows a leader',
      'unavailable',
      facts(three, { a0: { leaderId: '0' }, a1: { leaderId: '0' }, a2: { leaderId: '0' } }),
      { voters: 3, healthyVoters: 0, hasQuorum: false, faultTolerance: 0 },
    ],
    [
      'each names a different leader (split views)',
      'unavailable',
      facts(three, { a0: { leaderId: 'a0' }, a1: { leaderId: 'a1' }, a2: { leaderId: '0' } }),
      { voters: 3, healthyVoters: 1, hasQuorum: false, faultTolerance: 0 },
    ],
    [
      'two voters added but not started make four of which two answer',
      'unavailable',
      facts([member(0), member(1), unstarted(2), unstarted(3)]),
      { voters: 4, healthyVoters: 2, hasQuorum: false, faultTolerance: 0 },
    ],
    [
      'the member list could not be read now and only one of the last three answers',
      'unavailable',
      facts(three, { a1: down, a2: down }, { fresh: false, memberListError: 'etcd is unreachable' }),
      { voters: 3, healthyVoters: 1, hasQuorum: false, faultTolerance: 0 },
    ],
    [
      'only a learner answers',
      'unavailable',
      facts([member(0), learner(1)], { a0: down }),
      { voters: 1, healthyVoters: 0, hasQuorum: false, faultTolerance: 0 },
    ],
  ])('when %s, then it is %s', (_what, expected, observed, quorum) => {
    const health = classify(observed);

    expect(health.status).toBe(expected);
    expect(health.quorum).toMatchObject(quorum);
    if (expected === 'unavailable') expect(health.errors[0]).toMatch(/quorum needs|no endpoint answered/);
  });

  it('when no member list was ever read and nothing answers, then it is unavailable with no members', () => {
    const health = classify({ probes: [], memberListError: 'etcd is unreachable', alarmsError: 'etcd is unreachable' });

    expect(health).toMatchObject({ status: 'unavailable', leader: null, members: [], quorum: { voters: 0, hasQuorum: false } });
    expect(health.errors).toEqual(['no endpoint answered', 'member list: etcd is unreachable', 'alarm list: etcd is unreachable']);
  });

  it('when no member list was ever read but an endpoint answers, then it is still unavailable (nobody to count a quorum of)', () => {
    const health = classify({ probes: [{ url: 'http://10.0.0.0:2379', status: status(member(0)) }], memberListError: 'timed out' });

    expect(health.status).toBe('unavailable');
    expect(health.errors[0]).toMatch(/could not be read/);
  });
});

describe('classify: what it reports', () => {
  it('when all answer, then each member carries its raft and db numbers and the leader is named', () => {
    const health = classify(facts(three, { a1: { raftIndex: 999, raftAppliedIndex: 998, latencyMs: 3.5 } }));

    expect(health.leader).toEqual({ id: 'a0', name: 'etcd-0' });
    expect(health.members.filter((m) => m.isLeader).map((m) => m.name)).toEqual(['etcd-0']);
    expect(health.members[1]).toEqual({
      id: 'a1',
      name: 'etcd-1',
      isLearner: false,
      started: true,
      reachable: true,
      isLeader: false,
      raftTerm: 2,
      raftIndex: 999,
      raftAppliedIndex: 998,
      dbSizeBytes: 20480,
      dbSizeInUseBytes: 16384,
      latencyMs: 3.5,
      errors: [],
    });
    expect(health.errors).toEqual([]);
  });

  it('when a member does not answer, then its numbers are null and its errors say why', () => {
    const health = classify(facts(three, { a2: down }));

    expect(health.members[2]).toMatchObject({
      reachable: false,
      isLeader: false,
      raftTerm: null,
      raftIndex: null,
      dbSizeBytes: null,
      latencyMs: null,
    });
    expect(health.members[2].errors).toEqual([`http://10.0.0.2:2379: ${down}`]);
  });

  const refused = 'etcd 3.5.35 cannot run data written by 3.7; upgrade the image or restore';

  it("when this pod's etcd container refused to start etcd and left a note, then its member's errors and the answer's name it first", () => {
    const health = classify(facts(three, { a2: down }, { startNote: { member: 'etcd-2', text: refused } }));

    expect(health.status).toBe('degraded');
    expect(health.members[2].errors).toEqual([refused, `http://10.0.0.2:2379: ${down}`]);
    expect(health.errors).toEqual([`etcd-2: ${refused}`]);
  });

  it('when the member of a note answers after all, then the note is not shown (the script empties it when etcd starts)', () => {
    const health = classify(facts(three, {}, { startNote: { member: 'etcd-2', text: refused } }));

    expect(health.status).toBe('healthy');
    expect(health.members[2].errors).toEqual([]);
    expect(health.errors).toEqual([]);
  });

  it('when members disagree on the leader, then the dissenting one says what it sees', () => {
    const health = classify(facts(three, { a2: { leaderId: '0', errors: ['etcdserver: no leader'] } }));

    expect(health.members[2].errors).toEqual(['etcdserver: no leader', 'sees no leader, not the leader a0 a quorum agrees on']);
    expect(health.members[2].reachable).toBe(true);
  });

  it("when a learner lags, then its errors give its index and the leader's", () => {
    const health = classify(facts([...three, learner(3)], { a3: { raftIndex: 100 } }));

    expect(health.members[3].errors).toEqual(["lagging: raft index 100 is behind the leader's 1000 (a learner is in sync at 900)"]);
  });

  it('when the leader does not answer, then learners are measured against the highest index that follows it', () => {
    const health = classify(facts([...three, learner(3)], { a0: down, a1: { raftIndex: 2000 }, a3: { raftIndex: 1700 } }));

    expect(health.leader).toEqual({ id: 'a0', name: 'etcd-0' });
    expect(health.members[3].errors[0]).toMatch(/raft index 1700 is behind the leader's 2000/);
  });

  it('when alarms come from the alarm list, then each is shown once with its member name, and the Status errors name none', () => {
    const alarms: Alarm[] = [
      { memberId: 'a1', alarm: 'NOSPACE' },
      { memberId: 'a1', alarm: 'NOSPACE' },
      { memberId: 'a2', alarm: 'NONE' },
    ];
    // 162 is a2 in decimal, as etcd 3.4–3.6 print an AlarmMember in Status errors: read only from the alarm list.
    const health = classify(facts(three, { a2: { errors: ['memberID:162 alarm:CORRUPT '] } }, { alarms }));

    expect(health.alarms).toEqual([{ memberId: 'a1', name: 'etcd-1', alarm: 'NOSPACE' }]);
    expect(health.members.find((m) => m.id === 'a2')?.errors).toEqual(['memberID:162 alarm:CORRUPT ']);
    expect(health.status).toBe('degraded');
  });

  it('when NOSPACE is raised, then the errors say what clears it and which agent runs it', () => {
    const health = classify(facts(three, {}, { alarms: [{ memberId: 'a1', alarm: 'NOSPACE' }] }));

    expect(health.errors).toEqual([
      'NOSPACE: etcd takes only reads and deletes; POST /v1/maintenance/defragment to the agent of etcd-0 (while the alarm is raised, the agent of the started voter with the lowest id runs it) compacts, defragments every member one at a time and disarms it',
    ]);
  });

  it('when this agent is defragmenting a member that does not answer, then health says so and carries the run', () => {
    const maintenance = {
      action: 'defragment' as const,
      runId: 'r1',
      agent: 'etcd-0',
      mode: 'lock' as const,
      startedAt: '2026-12-01T00:00:00.000Z',
      step: 'defragmenting etcd-2 (2 of 3)',
      defragmenting: { id: 'a2', name: 'etcd-2' },
    };
    const health = classify(facts(three, { a2: down }, { maintenance, alarms: [{ memberId: 'a1', alarm: 'NOSPACE' }] }));

    expect(health.status).toBe('degraded');
    expect(health.maintenance).toEqual(maintenance);
    expect(health.members[2].errors).toEqual([
      'http://10.0.0.2:2379: no answer within 500 ms',
      'being defragmented by this agent (run r1)',
    ]);
    expect(health.errors).toContain(
      'NOSPACE: etcd takes only reads and deletes; this agent is clearing it (defragmenting etcd-2 (2 of 3))',
    );
  });

  it("when another agent's defragmentation record names a member that does not answer, then health names that agent", () => {
    const operations = [
      {
        id: 'o1',
        action: 'defragment' as const,
        member: { name: 'etcd-1', peerURLs: [] },
        agent: 'etcd-2',
        startedAt: '2026-12-01T00:00:00.000Z',
        step: 'defragmenting etcd-1 (1 of 3)',
      },
    ];
    const health = classify(facts(three, { a1: down }, { operations }));

    expect(health.members[1].errors[1]).toBe('being defragmented by the agent of etcd-2 (operation o1: defragmenting etcd-1 (1 of 3))');
  });

  it('when the alarm list cannot be read but every member answers without alarms, then it stays healthy and says so', () => {
    const observed = facts(three);
    delete observed.alarms;
    const health = classify({ ...observed, alarmsError: 'no answer within 500 ms' });

    expect(health.status).toBe('healthy');
    expect(health.errors).toEqual(['alarm list: no answer within 500 ms']);
  });

  it('when the member list is the last one read, then the answer says from when', () => {
    const health = classify(facts(three, {}, { fresh: false, memberListError: 'etcd is unreachable' }));

    expect(health.errors).toEqual([
      'member list: etcd is unreachable',
      'the member list could not be read in this observation; using the one read at 2026-11-29T12:00:00.000Z',
    ]);
  });

  it('when an endpoint answers as a member not in the list, then it is reported and not counted', () => {
    const observed = facts(three);
    observed.probes.push({ url: 'http://10.0.0.9:2379', status: { ...status(member(9)), leaderId: 'a0' } });

    const health = classify(observed);

    expect(health.quorum).toMatchObject({ voters: 3, healthyVoters: 3 });
    expect(health.errors).toEqual(['http://10.0.0.9:2379 answered as member a9, which is not in the member list']);
  });

  it('when operation records were read, then they are passed through, so a removal on purpose shows', () => {
    const operations: OperationRecord[] = [
      {
        id: 'op-1',
        action: 'memberLeave',
        member: { name: 'etcd-2', peerURLs: [] },
        agent: 'etcd-0',
        startedAt: '2026-11-29T12:00:00.000Z',
        step: 'removing',
      },
    ];

    const health = classify(facts(three, { a2: down }, { operations }));

    expect(health.operations).toEqual(operations);
    expect(health.status).toBe('degraded');
  });

  it('when operation records could not be read, then there is no operations field and an error says why', () => {
    const health = classify(facts(three, {}, { operationsError: 'etcd is unreachable' }));

    expect(health).not.toHaveProperty('operations');
    expect(health.errors).toEqual(['operation records: etcd is unreachable']);
  });
});

describe('withExpected', () => {
  it.each<[string, HealthStatus, string[], { missing: string[]; unexpected: string[] }]>([
    ['the same names', 'healthy', ['etcd-2', 'etcd-0', 'etcd-1'], { missing: [], unexpected: [] }],
    ['one more name', 'degraded', ['etcd-0', 'etcd-1', 'etcd-2', 'etcd-3'], { missing: ['etcd-3'], unexpected: [] }],
    ['one name fewer', 'degraded', ['etcd-0', 'etcd-1'], { missing: [], unexpected: ['etcd-2'] }],
    ['other names', 'degraded', ['etcd-0', 'etcd-1', 'etcd-9'], { missing: ['etcd-9'], unexpected: ['etcd-2'] }],
  ])('when a healthy cluster is expected to have %s, then it is %s', (_what, status, expected, diff) => {
    const health = withExpected(classify(facts(three)), expected);

    expect(health.status).toBe(status);
    expect(health.expected).toEqual(diff);
  });

  it('when the cluster is unavailable, then a difference does not make it better', () => {
    const health = withExpected(classify(facts(three, { a0: down, a1: down })), ['etcd-0']);

    expect(health.status).toBe('unavailable');
    expect(health.expected).toEqual({ missing: [], unexpected: ['etcd-1', 'etcd-2'] });
  });

  it('when a member has not started, then its empty name is neither missing nor unexpected', () => {
    const health = withExpected(classify(facts([...three, unstarted(3, true)])), ['etcd-0', 'etcd-1', 'etcd-2']);

    expect(health.expected).toEqual({ missing: [], unexpected: [] });
    expect(health.status).toBe('degraded');
  });
});

describe('isLearnerInSync (etcd promotes at 90% of the leader)', () => {
  it.each([
    [900, 1000, true],
    [899, 1000, false],
    [1000, 1000, true],
    [0, 0, true],
    [0, 10, false],
  ])('when a learner is at %i and the leader at %i, then in sync is %s', (learnerIndex, leaderIndex, expected) => {
    expect(isLearnerInSync(learnerIndex, leaderIndex)).toBe(expected);
  });
});

describe('classifyLocal', () => {
  const withLearner = [...three, learner(3)];
  const observe = (observed: ObservedFacts) => ({ facts: observed, health: classify(observed) });
  const probeOf = (observed: ObservedFacts, id: string): StatusProbe =>
    observed.probes.find((p) => p.status?.memberId === id) ?? { url: 'http://10.0.0.9:2379', error: down };

  it.each<[string, boolean, string | null, ObservedFacts, string]>([
    ['a follower answers', true, 'follower', facts(three), 'a1'],
    ['the leader answers', true, 'leader', facts(three), 'a0'],
    ['a learner in sync answers', true, 'learner', facts(withLearner, { a3: { raftIndex: 950 } }), 'a3'],
    ['a learner catching up answers', false, 'learner', facts(withLearner, { a3: { raftIndex: 500 } }), 'a3'],
    ['a learner answers but the leader does not', false, 'learner', facts(withLearner, { a0: down }), 'a3'],
    ['the local member does not answer', false, null, facts(three, { a2: 'etcd is unreachable' }), 'a2'],
    ['a follower answers but the member list is only the last one read', false, 'follower', facts(three, {}, { fresh: false }), 'a1'],
  ])('when %s, then ready is %s and the role is %s', (_what, ready, role, observed, id) => {
    const name = `etcd-${id.slice(1)}`;
    const local = classifyLocal(probeOf(observed, id), observe(observed), name);

    expect(local.ready).toBe(ready);
    expect(local.member.role).toBe(role);
    expect(local.member.name).toBe(name);
    if (!ready) expect(local.member.errors.length).toBeGreaterThan(0);
  });

  // `?voter=true`, the etcd container's readiness probe: a learner is never ready, as etcd's /readyz says from 3.5.19.
  it.each<[string, boolean, ObservedFacts, string, string | undefined]>([
    ['a follower answers', true, facts(three), 'a1', undefined],
    ['the leader answers', true, facts(three), 'a0', undefined],
    ['a learner in sync answers', false, facts(withLearner, { a3: { raftIndex: 950 } }), 'a3', LEARNER_NOT_READY],
    ['a learner catching up answers', false, facts(withLearner, { a3: { raftIndex: 500 } }), 'a3', LEARNER_NOT_READY],
  ])('when %s and a voter is asked for (?voter=true), then ready is %s', (_what, ready, observed, id, why) => {
    const local = classifyLocal(probeOf(observed, id), observe(observed), `etcd-${id.slice(1)}`, { learnerReady: false });

    expect(local.ready).toBe(ready);
    expect(local.member.errors.at(-1)).toBe(why);
  });

  it('when the local member does not answer, then it is named from the member list and its numbers are null', () => {
    const observed = facts(three, { a2: 'etcd is unreachable' });

    const local = classifyLocal({ url: 'http://127.0.0.1:2379', error: 'etcd is unreachable' }, observe(observed), 'etcd-2');

    expect(local).toEqual({
      ready: false,
      member: {
        id: 'a2',
        name: 'etcd-2',
        isLearner: false,
        started: true,
        reachable: false,
        isLeader: false,
        raftTerm: null,
        raftIndex: null,
        raftAppliedIndex: null,
        dbSizeBytes: null,
        dbSizeInUseBytes: null,
        latencyMs: null,
        errors: ['http://127.0.0.1:2379 did not answer: etcd is unreachable'],
        listed: true,
        role: null,
      },
      reading: { kind: 'not-answering', endpoint: 'http://127.0.0.1:2379', error: 'etcd is unreachable' },
    });
  });

  it('when the local member does not answer and its etcd container left a note, then the note comes first', () => {
    const refused = 'etcd 3.5.35 cannot run data written by 3.7; upgrade the image or restore';
    const observed = facts(three, { a2: 'etcd is unreachable' }, { startNote: { member: 'etcd-2', text: refused } });

    const local = classifyLocal({ url: 'http://127.0.0.1:2379', error: 'connection refused' }, observe(observed), 'etcd-2');

    expect(local.ready).toBe(false);
    expect(local.member.errors).toEqual([refused, 'http://127.0.0.1:2379 did not answer: connection refused']);
  });

  it('when the local endpoint answers as a member not in the list, then it is not ready', () => {
    const observed = facts(three);

    const local = classifyLocal({ url: 'http://127.0.0.1:2379', status: status(member(7)) }, observe(observed), 'etcd-7');

    expect(local.ready).toBe(false);
    expect(local.member.errors).toEqual(['member a7 is not in the member list']);
    expect(local.member).toMatchObject({ listed: false, role: null });
    expect(local.reading).toEqual({ kind: 'not-listed', memberId: 'a7' });
  });

  it('when no cluster observation finished in time, then even an answering member is not ready, and its role is not known', () => {
    const local = classifyLocal({ url: 'http://127.0.0.1:2379', status: status(member(1)) }, undefined, 'etcd-1');

    expect(local.ready).toBe(false);
    expect(local.member).toMatchObject({ role: null, listed: null });
    expect(local.reading).toEqual({ kind: 'not-observed' });
  });
});

describe('readRole', () => {
  const withLearner = [...three, learner(3)];
  const observe = (observed: ObservedFacts) => ({ facts: observed, health: classify(observed) });
  const url = 'http://127.0.0.1:2379';
  const noList = (observed: ObservedFacts): ObservedFacts => ({ ...observed, memberList: undefined });

  it.each<[string, StatusProbe, ReturnType<typeof observe> | undefined, RoleReading]>([
    ['the leader answers', { url, status: status(member(0)) }, observe(facts(three)), { kind: 'role', role: 'leader' }],
    ['a follower answers', { url, status: status(member(1)) }, observe(facts(three)), { kind: 'role', role: 'follower' }],
    ['a learner answers', { url, status: status(learner(3)) }, observe(facts(withLearner)), { kind: 'role', role: 'learner' }],
    ['a learner answers and no list was observed', { url, status: status(learner(3)) }, undefined, { kind: 'role', role: 'learner' }],
    [
      'a learner answers and the observation has no list',
      { url, status: status(learner(3)) },
      observe(noList(facts(three))),
      { kind: 'role', role: 'learner' },
    ],
    ['a voter answers and no observation finished in time', { url, status: status(member(1)) }, undefined, { kind: 'not-observed' }],
    [
      'a voter answers and the observation has no list',
      { url, status: status(member(1)) },
      observe(noList(facts(three))),
      { kind: 'not-observed' },
    ],
    [
      'a member the list does not hold answers (removed)',
      { url, status: status(member(7)) },
      observe(facts(three)),
      { kind: 'not-listed', memberId: 'a7' },
    ],
    [
      'a learner the list does not hold answers (removed)',
      { url, status: status(learner(7)) },
      observe(facts(three)),
      { kind: 'not-listed', memberId: 'a7' },
    ],
    [
      "this pod's etcd does not answer",
      { url, error: 'etcd is unreachable' },
      observe(facts(three)),
      { kind: 'not-answering', endpoint: url, error: 'etcd is unreachable' },
    ],
    [
      'a voter answers and no quorum names a leader',
      { url, status: status(member(1)) },
      observe(facts(three, { a0: down, a2: down })),
      { kind: 'role', role: 'follower' },
    ],
  ])('when %s, then the reading is %j', (_what, probe, observation, reading) => {
    expect(readRole(probe, observation)).toEqual(reading);
  });

  it.each<[Exclude<RoleReading, { kind: 'role' }>, string, number, Record<string, unknown>]>([
    [
      { kind: 'not-answering', endpoint: url, error: 'etcd is unreachable' },
      'unavailable',
      503,
      { reading: 'not-answering', endpoint: url },
    ],
    [{ kind: 'not-listed', memberId: 'a7' }, 'not-found', 404, { reading: 'not-listed', memberId: 'a7' }],
    [{ kind: 'not-observed' }, 'unavailable', 503, { reading: 'not-observed' }],
  ])('when the reading is %j, then the answer is %s (%i), details naming the fact', (reading, code, httpStatus, details) => {
    const err = noRoleError(reading, 1000);
    expect({ code: err.code, status: err.status, details: err.details }).toEqual({ code, status: httpStatus, details });
  });
});
