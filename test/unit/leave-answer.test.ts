import { answerWhenGone } from '../../agent/membership/leave';
import type { Member, MemberList } from '../../agent/proto/types';

const member = (id: string): Member => ({ id, name: `etcd-${id}`, peerURLs: [`http://${id}:2380`], clientURLs: [`http://${id}:2379`], isLearner: false, started: true });
const list = (...ids: string[]): MemberList => ({ clusterId: 'c', answeredBy: 'a', raftTerm: 2, members: ids.map(member) });

describe('answerWhenGone', () => {
  it.each<[string, MemberList, Member | undefined, string, string | undefined, string[]]>([
    ['nobody sent a remove and the member is not listed', list('a', 'b'), undefined, 'already-absent', undefined, ['a', 'b']],
    ['this call sent the remove and its answer was lost (the next read no longer lists it)', list('a', 'b'), member('c'), 'removed', 'c', ['a', 'b']],
    ['this call sent the remove and the list still shows it (read before the change applied)', list('a', 'b', 'c'), member('c'), 'removed', 'c', ['a', 'b']],
  ])('when %s, then the answer is %s naming %s', (_what, members, removed, outcome, named, left) => {
    const answer = answerWhenGone(members, removed);

    expect(answer).toMatchObject({ outcome, complete: true });
    expect(answer.member?.id).toBe(named);
    expect(answer.list.members.map((m) => m.id)).toEqual(left);
  });
});
