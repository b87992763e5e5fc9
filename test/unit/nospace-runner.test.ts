import { noSpaceRunner } from '../../agent/membership/nospace-runner';
import type { Member } from '../../agent/proto/types';

function member(id: string, name: string, extra: Partial<Member> = {}): Member {
  return {
    id,
    name,
    peerURLs: [`http://${name || id}:2380`],
    clientURLs: name === '' ? [] : [`http://${name}:2379`],
    isLearner: false,
    started: name !== '',
    ...extra,
  };
}

describe('who defragments under NOSPACE', () => {
  it.each<[string, Member[], string | undefined]>([
    ['one voter', [member('8e9e05c52164694d', 'etcd-0')], 'etcd-0'],
    [
      'the lowest id, compared as a number (not as text)',
      [member('fa', 'etcd-0'), member('1000', 'etcd-1'), member('ff', 'etcd-2')],
      'etcd-0',
    ],
    [
      'the lowest id of 16 hex digits',
      [member('ffffffffffffffff', 'a'), member('8000000000000000', 'b'), member('7fffffffffffffff', 'c')],
      'c',
    ],
    ['a learner with a lower id is passed over', [member('1', 'learner', { isLearner: true }), member('2', 'voter')], 'voter'],
    ['an unstarted member with a lower id is passed over', [member('1', ''), member('2', 'etcd-1')], 'etcd-1'],
    ['the order of the list does not matter', [member('c', 'etcd-2'), member('a', 'etcd-0'), member('b', 'etcd-1')], 'etcd-0'],
    ['no started voter', [member('1', ''), member('2', 'l', { isLearner: true })], undefined],
    ['no member', [], undefined],
  ])('when the members are %s, then the runner is %s', (_what, members, name) => {
    expect(noSpaceRunner(members)?.name).toBe(name);
  });
});
