/**
 * What a member says about itself on its own `GET <client URL>/metrics` (Prometheus text), for the
 * maintenance run: whether it is defragmenting now (`etcd_disk_defrag_inflight`, 3.4 to 3.7) and
 * its backend quota (`etcd_server_quota_backend_bytes`, the effective `--quota-backend-bytes`:
 * 2 GiB when unset, negative when disabled). The gRPC Status answers neither: a member that is
 * defragmenting does not answer Status at all until it is done (measured on 3.4 to 3.7), and 3.6's
 * `dbSizeQuota` is a field the etcd3 client's protocol files do not have. The metrics page answers
 * during a defragmentation. Parsing is pure (`parseMemberMetrics`); the fetch is a plain HTTP(S) GET
 * with the agent's etcd TLS files (a client certificate, when etcd requires one).
 */
import * as fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';

/** The member's own gauges the maintenance run reads. */
export interface MemberMetrics {
  /** `etcd_disk_defrag_inflight` is 1: a defragmentation is running in this member now. */
  defragmenting: boolean;
  /** The effective backend quota in bytes; undefined when disabled (negative) or not reported. */
  quotaBytes?: number;
}

/** TLS material for a client URL served over https. */
export interface MetricsTls {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
}

/** Largest page read: etcd's is 150–190 KB (3.4–3.7); a page far larger is not etcd's. */
const MAX_BYTES = 4 << 20;

/** The value of the unlabelled sample `name` in Prometheus text, or undefined when absent. */
function sample(text: string, name: string): number | undefined {
  const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  if (match === null) return undefined;
  const value = Number(match[1]);
  return Number.isNaN(value) ? undefined : value;
}

/** Reads the two gauges out of a member's `/metrics` page. Throws when the page has neither (it is not etcd's). */
export function parseMemberMetrics(text: string): MemberMetrics {
  const inflight = sample(text, 'etcd_disk_defrag_inflight');
  const quota = sample(text, 'etcd_server_quota_backend_bytes');
  if (inflight === undefined && quota === undefined) {
    throw new Error('the metrics page has neither etcd_disk_defrag_inflight nor etcd_server_quota_backend_bytes');
  }
  return { defragmenting: inflight === 1, ...(quota !== undefined && quota > 0 ? { quotaBytes: quota } : {}) };
}

/** GET `<clientURL>/metrics` within `timeoutMs` and parse it; rejects on any failure. */
export function fetchMemberMetrics(clientURL: string, timeoutMs: number, tls: MetricsTls = {}): Promise<MemberMetrics> {
  const url = new URL('/metrics', clientURL);
  const secure = url.protocol === 'https:';
  const options = secure
    ? {
        ...(tls.caFile === undefined ? {} : { ca: fs.readFileSync(tls.caFile) }),
        ...(tls.certFile === undefined || tls.keyFile === undefined ? {} : { cert: fs.readFileSync(tls.certFile), key: fs.readFileSync(tls.keyFile) }),
      }
    : {};
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => req.destroy(new Error(`${url.href}: no answer within ${timeoutMs} ms`)), timeoutMs);
    const req = (secure ? https : http).get(url, { agent: false, ...options }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
        if (body.length > MAX_BYTES) req.destroy(new Error(`${url.href} is larger than ${MAX_BYTES} bytes`));
      });
      res.on('end', () => {
        clearTimeout(timer);
        if (res.statusCode !== 200) return reject(new Error(`${url.href} answered HTTP ${res.statusCode}`));
        try {
          resolve(parseMemberMetrics(body));
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
      res.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}
