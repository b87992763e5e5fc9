import { decideSource, type StatusAnswer } from '../../agent/backup/source-decision';
import type { Member } from '../../agent/proto/types';
import { learner, member, memberStatus } from '../helpers/membership-fixtures';

/** What a member said: [the leader it names, its applied index], an error, or nothing asked. */
type Said = [leader: string, applied: number] | 'error';

function answers(said: Record<string, Said>): Map<string, StatusAnswer> {
  return new Map(
    Object.entries(said).map(([id, s]) => [id, s === 'error' ? { error: 'connection refused' } : { status: memberStatus(id, s[0], s[1]) }]),
  );
}

const abc = [member('a'), member('b'), member('c')];

describe('decideSource', () => {
  it.each<[string, Member[], Record<string, Said>, string]>([
    ['three healthy voters, a leads: the follower furthest applied', abc, { a: ['a', 100], b: ['a', 99], c: ['a', 100] }, 'c'],
    ['followers equally applied: the first by name', abc, { a: ['c', 100], b: ['c', 100], c: ['c', 100] }, 'a'],
    ['one follower silent: the other follower', abc, { a: ['a', 100], b: 'error', c: ['a', 100] }, 'c'],
    ['both followers silent but a quorum is not there', abc, { a: ['a', 100], b: 'error', c: 'error' }, 'none'],
    ['a single-member cluster: its leader', [member('a')], { a: ['a', 10] }, 'a'],
    ['two voters, the follower lags far behind: the leader', [member('a'), member('b')], { a: ['a', 10_000], b: ['a', 4000] }, 'a'],
    ['a follower within the lag limit is still a follower', [member('a'), member('b')], { a: ['a', 10_000], b: ['a', 5001] }, 'b'],
    ['a learner is never the source', [member('a'), learner('d')], { a: ['a', 100], d: ['a', 100] }, 'a'],
    ['a follower that names another leader is not healthy', abc, { a: ['a', 100], b: ['a', 100], c: ['c', 100] }, 'b'],
    ['no member knows a leader', abc, { a: ['0', 100], b: ['0', 100], c: ['0', 100] }, 'none'],
    ['an unstarted member is not asked', [member('a'), member('b'), member('x', { started: false })], { a: ['a', 10], b: ['a', 10] }, 'b'],
  ])('when %s, then %s', (_, members, said, expected) => {
    const decision = decideSource(members, answers(said));
    expect(decision.kind === 'member' ? decision.member.id : 'none').toBe(expected);
  });

  it('when none may be the source, then every member is named with why', () => {
    const decision = decideSource(abc, answers({ a: ['a', 100], b: 'error', c: 'error' }));
    expect(decision).toMatchObject({ kind: 'none', reason: expect.stringMatching(/no quorum: 1 of 3 voters/) });
    if (decision.kind !== 'none') throw new Error('a source was chosen');
    expect(decision.members.map((m) => m.name)).toEqual(['etcd-a', 'etcd-b', 'etcd-c']);
    expect(decision.members[1].why).toMatch(/no Status answer: connection refused/);
  });

  it('when the chosen member is a follower, then its client URL is the one snapshotted', () => {
    const decision = decideSource(abc, answers({ a: ['a', 100], b: ['a', 100], c: ['a', 99] }));
    expect(decision).toMatchObject({ kind: 'member', clientURL: 'http://etcd-b:2379', reason: expect.stringMatching(/follower etcd-b/) });
  });
});
