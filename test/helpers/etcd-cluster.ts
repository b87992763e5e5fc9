import { LocalClusterOptions, LocalEtcdCluster } from '../../scripts/local-cluster';
import { patience } from './eventually';

export { freePort, freePorts } from '../../scripts/ports';
export { LocalEtcdCluster } from '../../scripts/local-cluster';
export type { LocalMember, ListedMember, MemberSpec } from '../../scripts/local-cluster';

/** Starts a local etcd cluster of `size` members; the caller destroys it (e.g. in afterAll). */
export function startTestCluster(size: number, opts: Omit<LocalClusterOptions, 'size'> = {}): Promise<LocalEtcdCluster> {
  // Each jest worker gets its own ports and run directory, so test files may run in parallel.
  return LocalEtcdCluster.start({ size, logDir: process.env.LOCAL_ETCD_LOG_DIR, ...opts });
}

/**
 * Starts a cluster before the enclosing describe's tests and destroys it after them.
 * Returns a getter, because the cluster only exists once beforeAll has run.
 */
export function withCluster(size: number, opts: Omit<LocalClusterOptions, 'size'> = {}): () => LocalEtcdCluster {
  let cluster: LocalEtcdCluster | undefined;
  beforeAll(async () => {
    cluster = await startTestCluster(size, opts);
  }, patience(30_000));
  afterAll(async () => {
    await cluster?.destroy();
  });
  return () => {
    if (!cluster) throw new Error('the cluster has not started (is this called outside a test?)');
    return cluster;
  };
}

/**
 * Writes 600 kB values until etcd refuses one for its backend quota ("mvcc: database space
 * exceeded", which raises the NOSPACE alarm); answers the refusal. etcd measures its backend at each
 * batch commit (every 100 ms), so a burst of puts inside one interval all pass: each put is
 * followed by a pause longer than that. Any other failure (a put's timeout, say) is not the refusal
 * sought and is tried again; the loop ends by itself after `timeoutMs` of patience (TEST_TIME_SCALE lengthens it).
 */
export async function fillUntilNoSpace(put: (key: string, value: Buffer) => Promise<unknown>, timeoutMs = 30_000): Promise<Error> {
  const big = Buffer.alloc(600_000, 'x');
  let last: unknown;
  for (let i = 0, until = Date.now() + patience(timeoutMs); Date.now() < until; i++) {
    try {
      await put(`big/${i}`, big);
    } catch (err) {
      if (String(err).includes('database space exceeded')) return err as Error;
      last = err;
    }
    await new Promise((resolve) => setTimeout(resolve, 150));
  }
  throw new Error(`etcd never refused a put for its quota within ${timeoutMs} ms (last error: ${String(last)})`);
}
