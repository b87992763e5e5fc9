/**
 * HTTP load from the bench process with autocannon: a fixed number of
 * keep-alive connections for a fixed time, or a fixed low request rate.
 */
import autocannon from 'autocannon';
import { HttpClient } from './http';
import { sleep } from './stats';

/** What one load run measured. */
export interface LoadResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  total: number;
  non2xx: number;
  errors: number;
  seconds: number;
}

/** `connections` connections hammer `url` for `seconds`. */
export async function hammer(url: string, connections: number, seconds: number): Promise<LoadResult> {
  const result = await autocannon({ url, connections, duration: seconds, pipelining: 1 });
  const total = result['1xx'] + result['2xx'] + result['3xx'] + result['4xx'] + result['5xx'];
  return {
    requestsPerSecond: total / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    total,
    non2xx: result.non2xx,
    errors: result.errors,
    seconds: result.duration,
  };
}

/** GET `path` `perSecond` times a second for `seconds`, one request at a time (a probe's load). */
export async function trickle(base: string, path: string, perSecond: number, seconds: number): Promise<number> {
  const client = new HttpClient(base);
  const every = 1000 / perSecond;
  const until = performance.now() + seconds * 1000;
  let sent = 0;
  try {
    while (performance.now() < until) {
      const at = performance.now();
      await client.get(path);
      sent++;
      await sleep(Math.max(0, every - (performance.now() - at)));
    }
  } finally {
    client.close();
  }
  return sent;
}
