import { electLeader, roleOf, type LeaderVote, type Role } from '../../agent/membership/leader';
import { ClusterProbe } from '../../agent/membership/probe';
import { classify } from '../../agent/health/classify';
import type { Member, MemberStatus } from '../../agent/proto/types';

const vote = (leaderId: string, raftTerm: number): LeaderVote => ({ leaderId, raftTerm });

describe('electLeader', () => {
  it.each<[string, number, LeaderVote[], string | undefined, number]>([
    ['three voters agree', 3, [vote('a', 2), vote('a', 2), vote('a', 2)], 'a', 3],
    ['two of three agree, one silent', 3, [vote('a', 2), vote('a', 2)], 'a', 2],
    ['one of three answers', 3, [vote('a', 2)], undefined, 1],
    ['a deposed leader names itself in a higher term, a quorum names another', 3, [vote('a', 7), vote('c', 6), vote('c', 6)], 'c', 2],
    ['a minority names an old leader in a newer term', 5, [vote('a', 9), vote('a', 9), vote('c', 8), vote('c', 8), vote('c', 8)], 'c', 3],
    ['an even split, no quorum', 4, [vote('a', 3), vote('a', 3), vote('b', 4), vote('b', 4)], undefined, 2],
    ['nobody knows a leader', 3, [vote('0', 3), vote('0', 3), vote('0', 3)], undefined, 0],
    ['no voter answered', 3, [], undefined, 0],
  ])('when %s, then the leader is %s with %i agreeing', (_what, voters, votes, leader, agreeing) => {
    const verdict = electLeader(voters, votes);

    expect(verdict.leaderId).toBe(leader);
    expect(verdict.agreeing).toBe(agreeing);
  });

  it('when the votes tie without a quorum, then the most named is the higher term, then the lower id', () => {
    expect(electLeader(5, [vote('b', 3), vote('a', 4)]).mostNamed).toBe('a');
    expect(electLeader(5, [vote('b', 4), vote('a', 4)]).mostNamed).toBe('a');
  });
});

describe('one leader rule for the membership probe and /v1/health', () => {
  const member = (id: string): Member => ({
    id,
    name: `etcd-${id}`,
    peerURLs: [`http://${id}:2380`],
    clientURLs: [`http://${id}:2379`],
    isLearner: false,
    started: true,
  });
  const status = (memberId: string, leaderId: string, raftTerm: number): MemberStatus => ({
    memberId,
    leaderId,
    raftTerm,
    raftIndex: 10,
    raftAppliedIndex: 10,
    dbSizeBytes: 1,
    dbSizeInUseBytes: 1,
    revision: 1,
    isLearner: false,
    version: '3.4.23',
    errors: [],
    latencyMs: 1,
  });

  it.each<[string, Array<[string, string, number]>, string | undefined]>([
    [
      'a deposed leader that still names itself in a higher term',
      [
        ['a', 'a', 7],
        ['b', 'c', 6],
        ['c', 'c', 6],
      ],
      'c',
    ],
    [
      'a minority that names a leader the others do not',
      [
        ['a', 'a', 3],
        ['b', 'b', 4],
        ['c', 'c', 5],
      ],
      undefined,
    ],
    [
      'an agreed leader',
      [
        ['a', 'b', 2],
        ['b', 'b', 2],
        ['c', 'b', 2],
      ],
      'b',
    ],
  ])('when the members show %s, then leave/transfer and /v1/health name the same leader (%s)', (_what, views, leader) => {
    const members = views.map(([id]) => member(id));
    const probe = new ClusterProbe(
      views.map(([id, leads, term]) => ({ member: member(id), url: `http://${id}:2379`, status: status(id, leads, term) })),
    );
    const health = classify({
      memberList: { members, fresh: true, readAt: new Date().toISOString() },
      probes: views.map(([id, leads, term]) => ({ url: `http://${id}:2379`, status: status(id, leads, term) })),
      alarms: [],
    });

    expect(probe.leader?.member.id).toBe(leader);
    expect(health.leader?.id).toBe(leader);
  });
});

describe('roleOf, the one role rule', () => {
  it.each<[string, Role, { id: string; isLearner: boolean }, string | undefined]>([
    ['a voter the leader rule names', 'leader', { id: 'a', isLearner: false }, 'a'],
    ['a voter the rule does not name', 'follower', { id: 'b', isLearner: false }, 'a'],
    ['a voter while no quorum names a leader', 'follower', { id: 'a', isLearner: false }, undefined],
    ['a learner (even one a stale view names)', 'learner', { id: 'd', isLearner: true }, 'd'],
  ])('when it is %s, then the role is %s', (_what, role, member, leaderId) => {
    expect(roleOf(member, leaderId)).toBe(role);
  });
});
