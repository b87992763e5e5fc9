import { DEFRAG_CATCH_UP_MAX_MS, DEFRAG_MEMBER_TIMEOUT_MS } from '../../agent/config/timings';
import { describeWait, sameWait, waitLimitMs, type Wait } from '../../agent/maintenance/wait-reason';
import { member } from '../helpers/membership-fixtures';

const a = member('a');
const b = member('b');
const defragmenting = (m = a): Wait => ({ member: m, reason: { kind: 'defragmenting' } });
const catchingUp = (applied: number, m = a): Wait => ({
  member: m,
  reason: { kind: 'catching-up', appliedIndex: applied, catchUpIndex: 100 },
});

describe('why a defragmentation run waits', () => {
  it.each<[string, Wait, number, string]>([
    [
      'a member is defragmenting now',
      defragmenting(),
      DEFRAG_MEMBER_TIMEOUT_MS,
      'etcd-a (a) is being defragmented now (etcd_disk_defrag_inflight 1)',
    ],
    [
      'the member just done is catching up',
      catchingUp(80),
      DEFRAG_CATCH_UP_MAX_MS,
      'etcd-a (a) is applying what it missed while it was defragmented (80 of 100)',
    ],
  ])('when %s, then the wait lasts up to its kind’s limit and says so', (_what, wait, limit, words) => {
    expect(waitLimitMs(wait.reason)).toBe(limit);
    expect(describeWait(wait)).toBe(words);
  });

  it.each<[string, boolean, Wait, Wait]>([
    ['the same member defragmenting', true, defragmenting(), defragmenting()],
    ['another member defragmenting', false, defragmenting(), defragmenting(b)],
    ['the same member catching up, no further on', true, catchingUp(80), catchingUp(80)],
    ['the same member catching up, further on (its clock starts again)', false, catchingUp(80), catchingUp(90)],
    ['the member defragmenting, then catching up', false, defragmenting(), catchingUp(80)],
  ])('when two looks find %s, then they are the same wait: %s', (_what, same, first, second) => {
    expect(sameWait(first, second)).toBe(same);
  });
});
