import { parseMemberMetrics, type MemberMetrics } from '../../agent/etcd/member-metrics';

/** A metrics page of these samples, one per line, with the HELP and TYPE lines etcd writes around them. */
const page = (...samples: string[]): string => ['# HELP x y', '# TYPE x gauge', ...samples, ''].join('\n');

const INFLIGHT = 'etcd_disk_defrag_inflight 0';
const QUOTA = 'etcd_server_quota_backend_bytes 2.147483648e+09';
const COMPACTIONS = 'etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count 3';
const COMMITS = 'etcd_disk_backend_commit_duration_seconds_count 1234';

describe("a member's own metrics page, as the defragmentation run reads it", () => {
  it.each<[string, string, MemberMetrics]>([
    [
      'every figure the run reads',
      page(INFLIGHT, QUOTA, COMPACTIONS, 'etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_sum 58', COMMITS),
      { defragmenting: false, quotaBytes: 2_147_483_648, compactions: 3, commits: 1234 },
    ],
    [
      'a defragmentation running, the quota disabled',
      page('etcd_disk_defrag_inflight 1', 'etcd_server_quota_backend_bytes -1'),
      { defragmenting: true },
    ],
    [
      'no compaction counters (an etcd that does not report them)',
      page(INFLIGHT, QUOTA),
      { defragmenting: false, quotaBytes: 2_147_483_648 },
    ],
  ])('when the page has %s, then it reads as said', (_what, text, expected) => {
    expect(parseMemberMetrics(text)).toEqual(expected);
  });

  it("when the page has neither gauge, then it is not etcd's and the read fails", () => {
    expect(() => parseMemberMetrics(page(COMPACTIONS, COMMITS))).toThrow(/neither etcd_disk_defrag_inflight/);
  });
});
