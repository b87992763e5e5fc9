import type { Sent } from '../../agent/membership/answer';
import type { ClusterProbe } from '../../agent/membership/probe';
import { decideTransfer, transferredTo } from '../../agent/membership/transfer-decision';
import type { MemberList } from '../../agent/proto/types';
import { allAnswer, describeAnswer, learner, list, member, probe, said, sent } from '../helpers/membership-fixtures';

const three = list(member('a'), member('b'), member('c'));
const withLearner = list(member('a'), member('b'), member('c'), learner('d'));
// a leads; c is ahead of b, so c takes over when leadership moves away from a.
const aLeads = (l: MemberList): ClusterProbe => probe(l, { a: ['a', 100], b: ['a', 90], c: ['a', 95], d: ['a', 95] });

describe('decideTransfer', () => {
  it.each<[string, string, { to?: string; self: string }, MemberList, (l: MemberList) => ClusterProbe | undefined, Sent]>([
    ['not probed yet', 'probe', { to: 'etcd-b', self: 'etcd-a' }, three, () => undefined, sent()],
    [
      'one of three voters answers',
      'throws unavailable',
      { to: 'etcd-b', self: 'etcd-a' },
      three,
      (l) => probe(l, { a: ['a', 100] }),
      sent(),
    ],
    [
      'no quorum names a leader',
      'throws unavailable',
      { to: 'etcd-b', self: 'etcd-a' },
      three,
      (l) => probe(l, { a: ['a', 100], b: ['b', 100], c: ['0', 100] }),
      sent(),
    ],
    ['to: a member nobody has', 'throws not-found', { to: 'etcd-x', self: 'etcd-a' }, three, aLeads, sent()],
    ['to: a learner', 'throws bad-request', { to: 'etcd-d', self: 'etcd-a' }, withLearner, aLeads, sent()],
    ['to: the leader', 'answer already-leader complete leader a', { to: 'etcd-a', self: 'etcd-b' }, three, aLeads, sent()],
    [
      'to: the leader, after this call moved it there',
      'answer transferred complete leader a transferred',
      { to: 'etcd-a', self: 'etcd-b' },
      three,
      aLeads,
      sent('move-leader'),
    ],
    [
      'to: a voter that did not answer',
      'throws unsafe',
      { to: 'etcd-b', self: 'etcd-a' },
      three,
      (l) => probe(l, { a: ['a', 100], c: ['a', 100] }),
      sent(),
    ],
    ['to: a follower that answers', 'move-leader a→b', { to: 'etcd-b', self: 'etcd-c' }, three, aLeads, sent()],
    ['away, and this pod does not lead', 'answer not-leader complete leader a', { self: 'etcd-b' }, three, aLeads, sent()],
    ['away, and this pod is not listed', 'answer not-leader complete leader a', { self: 'etcd-x' }, three, aLeads, sent()],
    [
      'away, after this call moved it',
      'answer transferred complete leader c transferred',
      { self: 'etcd-a' },
      three,
      (l) => allAnswer(l, 'c'),
      sent('move-leader'),
    ],
    ['away, and this pod leads', 'move-leader a→c', { self: 'etcd-a' }, three, aLeads, sent()],
    [
      'away, and no other voter answers but a quorum does (learner ignored)',
      'move-leader a→c',
      { self: 'etcd-a' },
      withLearner,
      (l) => probe(l, { a: ['a', 100], c: ['a', 50], d: ['a', 100] }),
      sent(),
    ],
    [
      'away, and the only other member is a learner',
      'throws unsafe',
      { self: 'etcd-a' },
      list(member('a'), learner('d')),
      (l) => allAnswer(l),
      sent(),
    ],
    [
      'away, and the other voter is silent (no quorum)',
      'throws unavailable',
      { self: 'etcd-a' },
      list(member('a'), member('b'), learner('d')),
      (l) => probe(l, { a: ['a', 100], d: ['a', 100] }),
      sent(),
    ],
  ])('when %s, then the transfer decides: %s', (_what, decision, target, members, probed, sentSoFar) => {
    expect(said(() => decideTransfer(target, members, probed(members), sentSoFar))).toBe(decision);
  });

  it('when leadership has moved, then the answer names the new leader and says it was transferred', () => {
    const to = allAnswer(three).of('b');
    expect(to).toBeDefined();
    if (to !== undefined) expect(describeAnswer(transferredTo(three, to))).toBe('answer transferred complete leader b transferred');
  });
});
