import type { Sent } from '../../agent/membership/answer';
import type { EtcdRefusal } from '../../agent/etcd/errors';
import type { MatchWanted } from '../../agent/membership/match';
import type { ClusterProbe } from '../../agent/membership/probe';
import { answerToPromoteRefusal, decidePromote, promotedAnswer } from '../../agent/membership/promote-decision';
import type { MemberList } from '../../agent/proto/types';
import { allAnswer, describeAnswer, learner, list, member, probe, said, sent } from '../helpers/membership-fixtures';

const d: MatchWanted = { id: 'd', peerURLs: [] };
const withD = (dm: ReturnType<typeof member>): MemberList => list(member('a'), member('b'), member('c'), dm);
const lag =
  (index: number) =>
  (l: MemberList): ClusterProbe =>
    probe(l, { a: ['a', 100], b: ['a', 100], c: ['a', 100], d: ['a', index] });

describe('decidePromote', () => {
  it.each<[string, string, MatchWanted, MemberList, (l: MemberList) => ClusterProbe | undefined, Sent]>([
    ['no member has the id', 'throws not-found', d, list(member('a')), () => undefined, sent()],
    ['the id is not hex', 'throws bad-request', { id: 'xyz', peerURLs: [] }, withD(learner('d')), () => undefined, sent()],
    ['the member is unstarted', 'answer in-progress d unstarted incomplete', d, withD(learner('d', false)), () => undefined, sent()],
    ['the member is a voter', 'answer already-member d voter complete', d, withD(member('d')), () => undefined, sent()],
    [
      'the member is a voter this call promoted (its answer was lost)',
      'answer promoted d voter complete',
      d,
      withD(member('d')),
      () => undefined,
      sent('promote'),
    ],
    ['the member is a learner, not probed yet', 'probe', d, withD(learner('d')), () => undefined, sent()],
    ['the learner is at 89% of the leader index', 'answer in-progress d learner incomplete', d, withD(learner('d')), lag(89), sent()],
    ['the learner is at 90% of the leader index', 'promote d', d, withD(learner('d')), lag(90), sent()],
    ['the learner is in sync', 'promote d', d, withD(learner('d')), (l) => allAnswer(l), sent()],
    [
      'the learner is in sync but two of three voters are silent',
      'throws unavailable',
      d,
      withD(learner('d')),
      (l) => probe(l, { a: ['a', 100], d: ['a', 100] }),
      sent(),
    ],
    [
      'no voter names a leader (etcd decides)',
      'promote d',
      d,
      withD(learner('d')),
      (l) => probe(l, { a: ['0', 100], b: ['0', 100], c: ['0', 100], d: ['0', 1] }),
      sent(),
    ],
  ])('when %s, then the promote decides: %s', (_what, decision, wanted, members, probed, sentSoFar) => {
    expect(said(() => decidePromote(wanted, members, probed(members), sentSoFar))).toBe(decision);
  });
});

describe('the answers after MemberPromote', () => {
  const members = withD(learner('d'));
  it.each<[string, string, EtcdRefusal | undefined]>([
    ['etcd finds the learner not in sync yet', 'answer in-progress d learner incomplete', 'learner-not-ready'],
    ['etcd says it is not a learner (promoted meanwhile)', 'answer already-member d voter complete', 'not-learner'],
    ['etcd says the member is not found', 'rethrow', 'member-not-found'],
    ['it failed without a refusal', 'rethrow', undefined],
  ])('when %s, then: %s', (_what, expected, refusal) => {
    const answer = answerToPromoteRefusal(members, learner('d'), refusal);
    expect(answer === undefined ? 'rethrow' : describeAnswer(answer)).toBe(expected);
  });

  it('when etcd accepted, then the answer is promoted and the list shows the member a voter', () => {
    const answer = promotedAnswer(members, learner('d'));
    expect(describeAnswer(answer)).toBe('answer promoted d voter complete');
    expect(answer.list.members.find((m) => m.id === 'd')).toMatchObject({ isLearner: false });
  });
});
