/**
 * What a member says about itself on its own `GET <client URL>/metrics` (Prometheus text), for the
 * maintenance run: whether it is defragmenting now (`etcd_disk_defrag_inflight`, 3.4 to 3.7) and
 * its backend quota (`etcd_server_quota_backend_bytes`, the effective `--quota-backend-bytes`:
 * 2 GiB when unset, negative when disabled), and two counters that show a compaction reach its
 * in-use size (maintenance/compaction-settle.ts): finished compactions
 * (`etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count`) and backend commits
 * (`etcd_disk_backend_commit_duration_seconds_count`). The gRPC Status answers none of them: a
 * member that is defragmenting does not answer Status at all until it is done (measured on 3.4 to
 * 3.7), and 3.6's `dbSizeQuota` is a field the etcd3 client's protocol files do not have. The
 * metrics page answers during a defragmentation. Parsing is pure (`parseMemberMetrics`); the fetch
 * is a plain HTTP(S) GET with the agent's etcd TLS files (a client certificate, when etcd requires
 * one).
 */
import { getText, tlsFromFiles, type TlsFiles } from '../lib/http-request';

/** The member's own gauges the maintenance run reads. */
export interface MemberMetrics {
  /** `etcd_disk_defrag_inflight` is 1: a defragmentation is running in this member now. */
  defragmenting: boolean;
  /** The effective backend quota in bytes; undefined when disabled (negative) or not reported. */
  quotaBytes?: number;
  /** Compactions this member has finished since it started; undefined when not reported. */
  compactions?: number;
  /** Commits of this member's backend since it started; undefined when not reported. */
  commits?: number;
}

/** A member's gauges, or why they could not be read. */
export type MetricsAnswer = MemberMetrics | { error: string };

/** Largest page read: etcd's is 150–190 KB (3.4–3.7); a page far larger is not etcd's. */
const MAX_BYTES = 4 << 20;

/** The value of the unlabelled sample `name` in Prometheus text, or undefined when absent. */
function sample(text: string, name: string): number | undefined {
  const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  if (match === null) return undefined;
  const value = Number(match[1]);
  return Number.isNaN(value) ? undefined : value;
}

/** Reads the gauges and counters out of a member's `/metrics` page. Throws when the page has neither gauge (it is not etcd's). */
export function parseMemberMetrics(text: string): MemberMetrics {
  const inflight = sample(text, 'etcd_disk_defrag_inflight');
  const quota = sample(text, 'etcd_server_quota_backend_bytes');
  if (inflight === undefined && quota === undefined) {
    throw new Error('the metrics page has neither etcd_disk_defrag_inflight nor etcd_server_quota_backend_bytes');
  }
  const compactions = sample(text, 'etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count');
  const commits = sample(text, 'etcd_disk_backend_commit_duration_seconds_count');
  return {
    defragmenting: inflight === 1,
    ...(quota !== undefined && quota > 0 ? { quotaBytes: quota } : {}),
    ...(compactions === undefined ? {} : { compactions }),
    ...(commits === undefined ? {} : { commits }),
  };
}

/** GET `<clientURL>/metrics` within `timeoutMs` and parse it; rejects on any failure. */
export async function fetchMemberMetrics(clientURL: string, timeoutMs: number, tls: TlsFiles = {}): Promise<MemberMetrics> {
  const url = new URL('/metrics', clientURL).href;
  return parseMemberMetrics(await getText(url, { timeoutMs, maxBytes: MAX_BYTES, tls: tlsFromFiles(url, tls) }));
}
