import type { Sent } from '../../agent/membership/answer';
import { addedAnswer, decideJoin, type JoinWanted } from '../../agent/membership/join-decision';
import type { ClusterProbe } from '../../agent/membership/probe';
import type { MemberList } from '../../agent/proto/types';
import { allAnswer, describeAnswer, learner, list, member, probe, said, sent } from '../helpers/membership-fixtures';

const asLearner: JoinWanted = { name: 'etcd-d', peerURLs: ['http://etcd-d:2380'], learner: true };
const asVoter: JoinWanted = { ...asLearner, learner: false };
const three = list(member('a'), member('b'), member('c'));
const withD = (d: ReturnType<typeof member>): MemberList => list(member('a'), member('b'), member('c'), d);

describe('decideJoin', () => {
  it.each<[string, string, JoinWanted, MemberList, (l: MemberList) => ClusterProbe | undefined, Sent]>([
    // No member matches: add, once the probe allows it.
    ['no member matches, not probed yet', 'probe', asLearner, three, () => undefined, sent()],
    ['no member matches, every voter answers', 'add', asLearner, three, (l) => allAnswer(l), sent()],
    ['no member matches, one of three voters answers', 'throws unavailable', asLearner, three, (l) => probe(l, { a: ['a', 100] }), sent()],
    [
      'a voter is wanted and two of three voters answer (4 voters, 2 healthy)',
      'throws unsafe',
      asVoter,
      three,
      (l) => probe(l, { a: ['a', 100], b: ['a', 100] }),
      sent(),
    ],
    ['a voter is wanted and every voter answers', 'add', asVoter, three, (l) => allAnswer(l), sent()],
    ['a learner is wanted while learner e exists', 'throws busy', asLearner, withD(learner('e')), (l) => allAnswer(l), sent()],
    ['a voter is wanted while learner e exists', 'add', asVoter, withD(learner('e')), (l) => allAnswer(l), sent()],
    ['no peer URL is known', 'throws bad-request', { ...asLearner, peerURLs: [] }, three, () => undefined, sent()],
    [
      'the name belongs to a member with other peer URLs',
      'throws conflict',
      { ...asLearner, name: 'etcd-a' },
      three,
      () => undefined,
      sent(),
    ],
    // The member is listed: what it has reached decides.
    [
      'it is listed unstarted (added by an earlier call)',
      'answer in-progress d unstarted incomplete',
      asLearner,
      withD(learner('d', false)),
      () => undefined,
      sent(),
    ],
    [
      'it is listed unstarted, added by this call',
      'answer added d unstarted incomplete',
      asLearner,
      withD(learner('d', false)),
      () => undefined,
      sent('add'),
    ],
    ['it is a started voter', 'answer already-member d voter complete', asLearner, withD(member('d')), () => undefined, sent()],
    [
      'it is a started voter this call promoted',
      'answer promoted d voter complete',
      asLearner,
      withD(member('d')),
      () => undefined,
      sent('add', 'promote'),
    ],
    ['it is a started learner, not probed yet', 'probe', asLearner, withD(learner('d')), () => undefined, sent()],
    [
      'it is a learner at half the leader index',
      'answer in-progress d learner incomplete',
      asLearner,
      withD(learner('d')),
      (l) => probe(l, { a: ['a', 100], b: ['a', 100], c: ['a', 100], d: ['a', 50] }),
      sent(),
    ],
    [
      'it is a learner within 10% of the leader',
      'promote d',
      asLearner,
      withD(learner('d')),
      (l) => probe(l, { a: ['a', 100], b: ['a', 100], c: ['a', 100], d: ['a', 95] }),
      sent(),
    ],
    [
      'it is a learner that did not answer (etcd decides)',
      'promote d',
      asLearner,
      withD(learner('d')),
      (l) => probe(l, { a: ['a', 100], b: ['a', 100], c: ['a', 100] }),
      sent(),
    ],
    [
      'it is a learner and only one voter answers',
      'throws unavailable',
      asLearner,
      withD(learner('d')),
      (l) => probe(l, { a: ['a', 100], d: ['a', 100] }),
      sent(),
    ],
  ])('when %s, then the join decides: %s', (_what, decision, wanted, members, probed, sentSoFar) => {
    expect(said(() => decideJoin(wanted, members, probed(members), sentSoFar))).toBe(decision);
  });

  it('when fewer than a quorum of voters answer, then the refusal says why each silent voter is counted out', () => {
    expect(() => decideJoin(asLearner, three, probe(three, { a: ['a', 100] }), sent())).toThrow(
      expect.objectContaining({
        code: 'unavailable',
        message: 'only 1 of 3 voters answered a status call; a quorum needs 2 (etcd-b: silent; etcd-c: silent)',
        details: {
          voters: 3,
          healthyVoters: 1,
          required: 2,
          silent: [
            { name: 'etcd-b', error: 'silent' },
            { name: 'etcd-c', error: 'silent' },
          ],
        },
      }),
    );
  });
});

describe('the answer after MemberAdd', () => {
  it('when etcd accepted, then the answer is added, unstarted, with the new member in the list', () => {
    const added = learner('d', false);
    const answer = addedAnswer(three, added);
    expect(describeAnswer(answer)).toBe('answer added d unstarted incomplete');
    expect(answer.list.members.map((m) => m.id)).toEqual(['a', 'b', 'c', 'd']);
  });
});
