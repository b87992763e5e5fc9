import { memberStatus } from '../helpers/membership-fixtures';
import { NOT_ASKED, urlsToAskAgain } from '../../agent/health/reask';
import type { StatusProbe } from '../../agent/health/types';
import type { Member, MemberStatus } from '../../agent/proto/types';

function member(id: string, isLearner = false, started = true): Member {
  return {
    id,
    name: started ? `etcd-${id}` : '',
    peerURLs: [`http://${id}:2380`],
    clientURLs: started ? [`http://${id}:2379`] : [],
    isLearner,
    started,
  };
}

const status = (memberId: string): MemberStatus => memberStatus(memberId);

/** What the first round saw of one member: its answer, a failure, never sent for lack of time, or not asked at all. */
type Seen = 'answered' | 'silent' | 'not-sent' | 'not-asked';
/** [id, isLearner, started, what the first round saw] */
type Row = [string, boolean, boolean, Seen];

function probes(rows: Row[]): StatusProbe[] {
  return rows.flatMap(([id, , , seen]): StatusProbe[] => {
    const url = `http://${id}:2379/`; // as the cluster hands it back: compared canonically
    if (seen === 'answered') return [{ url, status: status(id) }];
    if (seen === 'silent') return [{ url, error: 'no answer within 500 ms' }];
    if (seen === 'not-sent') return [{ url, error: NOT_ASKED }];
    return [];
  });
}

describe('urlsToAskAgain: whom a health observation asks a second time', () => {
  it.each<[string, Row[] | undefined, string[]]>([
    ['no member list known: nobody', undefined, []],
    [
      'a quorum answered, one voter silent: nobody (the verdict stands, the observation ends)',
      [
        ['a', false, true, 'answered'],
        ['b', false, true, 'answered'],
        ['c', false, true, 'silent'],
      ],
      [],
    ],
    [
      'one of three answered: both silent voters',
      [
        ['a', false, true, 'answered'],
        ['b', false, true, 'silent'],
        ['c', false, true, 'silent'],
      ],
      ['http://b:2379', 'http://c:2379'],
    ],
    [
      'nobody answered: every voter',
      [
        ['a', false, true, 'silent'],
        ['b', false, true, 'silent'],
        ['c', false, true, 'silent'],
      ],
      ['http://a:2379', 'http://b:2379', 'http://c:2379'],
    ],
    [
      'a learner answering does not count toward the quorum, and a silent learner is not asked again',
      [
        ['a', false, true, 'answered'],
        ['b', false, true, 'silent'],
        ['c', false, true, 'silent'],
        ['d', true, true, 'answered'],
        ['e', true, true, 'silent'],
      ],
      ['http://b:2379', 'http://c:2379'],
    ],
    [
      'a voter never sent for lack of time is not asked again',
      [
        ['a', false, true, 'answered'],
        ['b', false, true, 'not-sent'],
        ['c', false, true, 'silent'],
      ],
      ['http://c:2379'],
    ],
    [
      'an unstarted voter (no client URL) counts as a voter but cannot be asked',
      [
        ['a', false, true, 'answered'],
        ['b', false, false, 'not-asked'],
        ['c', false, true, 'silent'],
      ],
      ['http://c:2379'],
    ],
    [
      'two of five answered: the three silent ones',
      [
        ['a', false, true, 'answered'],
        ['b', false, true, 'answered'],
        ['c', false, true, 'silent'],
        ['d', false, true, 'silent'],
        ['e', false, true, 'silent'],
      ],
      ['http://c:2379', 'http://d:2379', 'http://e:2379'],
    ],
    [
      'three of five answered: nobody',
      [
        ['a', false, true, 'answered'],
        ['b', false, true, 'answered'],
        ['c', false, true, 'answered'],
        ['d', false, true, 'silent'],
        ['e', false, true, 'silent'],
      ],
      [],
    ],
  ])('%s', (_name, rows, expected) => {
    const members = rows?.map(([id, learner, started]) => member(id, learner, started));
    expect(urlsToAskAgain(members, probes(rows ?? []))).toEqual(expected);
  });
});
