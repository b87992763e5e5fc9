import { DEFRAG_CATCH_UP_MAX_MS, DEFRAG_COMPACTION_SETTLE_MAX_MS, DEFRAG_MEMBER_TIMEOUT_MS } from '../../agent/config/timings';
import { describeWait, sameWait, waitLimitMs, type Wait } from '../../agent/maintenance/wait-reason';
import { member } from '../helpers/membership-fixtures';

const a = member('a');
const b = member('b');
const defragmenting = (m = a): Wait => ({ member: m, reason: { kind: 'defragmenting' } });
const catchingUp = (applied: number, m = a): Wait => ({
  member: m,
  reason: { kind: 'catching-up', appliedIndex: applied, catchUpIndex: 100 },
});

const compacting = (commits: number, commitsLeft?: number, m = a): Wait => ({
  member: m,
  reason: { kind: 'compacting', commits, ...(commitsLeft === undefined ? {} : { commitsLeft }) },
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
    [
      'a voter has not finished the compaction',
      compacting(30),
      DEFRAG_COMPACTION_SETTLE_MAX_MS,
      'etcd-a (a) has not finished the compaction yet',
    ],
    [
      'a voter finished the compaction, its backend has not committed it twice',
      compacting(31, 1),
      DEFRAG_COMPACTION_SETTLE_MAX_MS,
      'etcd-a (a) finished the compaction; its in-use size shows it after 1 more commit of its backend',
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
    ['the same voter compacting, no commit since', true, compacting(30), compacting(30)],
    ['the same voter compacting, a commit since (its clock starts again)', false, compacting(30), compacting(31)],
    ['the same voter, then finished the compaction', false, compacting(31), compacting(31, 2)],
  ])('when two looks find %s, then they are the same wait: %s', (_what, same, first, second) => {
    expect(sameWait(first, second)).toBe(same);
  });
});
