import type { EtcdRefusal } from '../../agent/etcd/errors';
import {
  answerToRemoveRefusal,
  answerWhenGone,
  decideLeave,
  removedAnswer,
  type LeaveProgress,
} from '../../agent/membership/leave-decision';
import type { MatchWanted } from '../../agent/membership/match';
import type { ClusterProbe } from '../../agent/membership/probe';
import type { Member, MemberList } from '../../agent/proto/types';
import { allAnswer, describeAnswer, learner, list, member, probe, said, sent } from '../helpers/membership-fixtures';

const byName = (id: string): MatchWanted => ({ name: `etcd-${id}`, peerURLs: [`http://etcd-${id}:2380`] });
const three = list(member('a'), member('b'), member('c'));
const fresh: LeaveProgress = { sent: sent(), moved: false };
const moved: LeaveProgress = { sent: sent('move-leader'), moved: true };
// b leads; a is ahead of c, so a takes over when b leaves.
const bLeads = (l: MemberList): ClusterProbe => probe(l, { a: ['b', 100], b: ['b', 100], c: ['b', 90] });

describe('decideLeave', () => {
  it.each<[string, string, MatchWanted, boolean, MemberList, (l: MemberList) => ClusterProbe | undefined, LeaveProgress]>([
    ['no member matches', 'answer already-absent complete', byName('d'), false, three, () => undefined, fresh],
    [
      'no member matches any more after this call removed it',
      'answer removed c complete',
      byName('c'),
      false,
      list(member('a'), member('b')),
      () => undefined,
      { sent: sent('remove'), removing: member('c'), moved: false },
    ],
    [
      'the member is gone after this call moved leadership and removed it',
      'answer removed b complete transferred',
      byName('b'),
      false,
      list(member('a'), member('c')),
      () => undefined,
      { sent: sent('move-leader', 'remove'), removing: member('b'), moved: true },
    ],
    [
      'the member is a learner',
      'remove d',
      byName('d'),
      false,
      list(member('a'), member('b'), member('c'), learner('d')),
      () => undefined,
      fresh,
    ],
    [
      'the member is unstarted',
      'remove d',
      { name: '', peerURLs: ['http://etcd-d:2380'] },
      false,
      list(member('a'), member('b'), member('c'), learner('d', false)),
      () => undefined,
      fresh,
    ],
    ['the member is a voter, not probed yet', 'probe', byName('c'), false, three, () => undefined, fresh],
    ['a follower leaves and every voter answers', 'remove c', byName('c'), false, three, (l) => allAnswer(l), fresh],
    [
      'a follower leaves while another voter is silent',
      'throws unsafe',
      byName('c'),
      false,
      three,
      (l) => probe(l, { a: ['a', 100], c: ['a', 100] }),
      fresh,
    ],
    [
      'a follower leaves, forced, while another voter is silent',
      'remove c',
      byName('c'),
      true,
      three,
      (l) => probe(l, { a: ['a', 100], c: ['a', 100] }),
      fresh,
    ],
    ['the last voter leaves, forced', 'throws unsafe', byName('a'), true, list(member('a')), (l) => allAnswer(l), fresh],
    ['the leader leaves', 'move-leader b→a', byName('b'), false, three, bLeads, fresh],
    ['the leader leaves after this call moved leadership (views still lag)', 'remove b', byName('b'), false, three, bLeads, moved],
    [
      'the leader leaves and no other voter answers, forced',
      'remove b',
      byName('b'),
      true,
      three,
      (l) => probe(l, { b: ['b', 100] }),
      fresh,
    ],
    [
      'a voter leaves after a MoveLeader whose answer was lost',
      'remove b',
      byName('b'),
      false,
      three,
      (l) => allAnswer(l, 'a'),
      { sent: sent('move-leader'), moved: false },
    ],
    [
      'the name matches one member and the peer URL another',
      'throws conflict',
      { name: 'etcd-a', peerURLs: ['http://etcd-b:2380'] },
      false,
      three,
      () => undefined,
      fresh,
    ],
  ])('when %s, then the leave decides: %s', (_what, decision, wanted, force, members, probed, done) => {
    expect(said(() => decideLeave(wanted, force, members, probed(members), done))).toBe(decision);
  });

  it('when a voter is removed after a MoveLeader whose answer was lost, then the answer says leadership was transferred', () => {
    const decision = decideLeave(byName('b'), false, three, allAnswer(three, 'a'), { sent: sent('move-leader'), moved: false });
    expect(decision).toMatchObject({ kind: 'remove', leaderTransferred: true });
  });

  it('when the check after this call moved leadership finds the removal unsafe, then the refusal says leadership moved', () => {
    let refusal: unknown;
    try {
      decideLeave(byName('b'), false, three, probe(three, { a: ['a', 100], b: ['a', 100] }), moved);
    } catch (err) {
      refusal = err;
    }
    expect(refusal).toMatchObject({ code: 'unsafe', details: { leaderTransferred: true, forceable: true } });
  });

  it('when a forced removal overrides the quorum check, then the decision carries the warning', () => {
    const decision = decideLeave(byName('c'), true, three, probe(three, { a: ['a', 100], c: ['a', 100] }), fresh);
    expect(decision).toMatchObject({ kind: 'remove', forced: 'removing etcd-c leaves 1 healthy voter of 2; quorum needs 2' });
  });
});

describe('the answers after MemberRemove', () => {
  const c = member('c');
  it.each<[string, string, EtcdRefusal | undefined, Member | undefined]>([
    ['etcd says the member is not found, nothing sent before', 'answer already-absent complete', 'member-not-found', undefined],
    ['etcd says the member is not found after an earlier remove of this call', 'answer removed c complete', 'member-not-found', c],
    ['etcd refused it as an unhealthy cluster', 'rethrow', 'unhealthy-cluster', undefined],
    ['it failed without a refusal', 'rethrow', undefined, undefined],
  ])('when %s, then: %s', (_what, expected, refusal, before) => {
    const answer = answerToRemoveRefusal(three, c, refusal, before, false);
    expect(answer === undefined ? 'rethrow' : describeAnswer(answer)).toBe(expected);
    if (answer !== undefined) expect(answer.list.members.map((m) => m.id)).toEqual(['a', 'b']);
  });

  it('when etcd accepted, then the answer is removed, naming the member, with the list after the change', () => {
    const answer = removedAnswer(three, c, true);
    expect(describeAnswer(answer)).toBe('answer removed c complete transferred');
    expect(answer.list.members.map((m) => m.id)).toEqual(['a', 'b']);
  });

  it.each<[string, string, MemberList, Member | undefined, string[]]>([
    [
      'nobody sent a remove and the member is not listed',
      'answer already-absent complete',
      list(member('a'), member('b')),
      undefined,
      ['a', 'b'],
    ],
    ['this call sent the remove and its answer was lost', 'answer removed c complete', list(member('a'), member('b')), c, ['a', 'b']],
    [
      'this call sent the remove and the list still shows it (read before the change applied)',
      'answer removed c complete',
      three,
      c,
      ['a', 'b'],
    ],
  ])('when %s, then answerWhenGone says %s', (_what, expected, members, removed, left) => {
    const answer = answerWhenGone(members, removed);
    expect(describeAnswer(answer)).toBe(expected);
    expect(answer.list.members.map((m) => m.id)).toEqual(left);
  });
});
