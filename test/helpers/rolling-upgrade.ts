/**
 * What the rolling-upgrade test keeps running while it replaces etcd binaries under the cluster:
 * a writer (puts of increasing values through etcd's own HTTP gateway, every acknowledged one
 * recorded) and a caller (the agent's `/v1/health` on an agent whose member stays up, and kbagent's
 * roleProbe on every agent), all over real HTTP. Each answer keeps when it was asked and what it
 * said, so the test can hold them against the moments it stopped and started members.
 *
 * Invariant: the writer counts a put as acknowledged only when etcd answered it with 200; a put that
 * failed or timed out is never counted (it may or may not have been applied), and the next value is
 * sent to the next endpoint.
 */
import { patience } from './eventually';
import { call } from './http-call';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const b64 = (text: string): string => Buffer.from(text).toString('base64');

/** One acknowledged put: its value and when the answer came (ms since the epoch). */
export interface Ack {
  n: number;
  at: number;
}

/** Puts `<prefix><n>` = n, n = 1, 2, …, one at a time, rotating through the endpoints on failure. */
export class Writer {
  readonly acks: Ack[] = [];
  failures = 0;
  private stopped = false;
  private running?: Promise<void>;

  constructor(
    private readonly endpoints: () => string[],
    readonly prefix: string,
    private readonly pauseMs = 20,
  ) {}

  /** The key of value `n` (zero-padded, so keys sort as the values do). */
  key(n: number): string {
    return `${this.prefix}${String(n).padStart(8, '0')}`;
  }

  start(): this {
    this.running = this.loop();
    return this;
  }

  /** Stops after the put in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  /** The longest time between two acknowledged puts answered inside [from, to], with the edges of the window counted. */
  longestGapMs(from: number, to: number): number {
    const inside = this.acks.filter((a) => a.at >= from && a.at <= to).map((a) => a.at);
    const points = [from, ...inside, to];
    let longest = 0;
    for (let i = 1; i < points.length; i++) longest = Math.max(longest, points[i] - points[i - 1]);
    return longest;
  }

  /** How many puts were acknowledged inside [from, to]. */
  ackedBetween(from: number, to: number): number {
    return this.acks.filter((a) => a.at >= from && a.at <= to).length;
  }

  private async loop(): Promise<void> {
    let endpoint = 0;
    for (let n = 1; !this.stopped; n++) {
      const urls = this.endpoints();
      const url = urls[endpoint % urls.length];
      try {
        const answer = await call(url, {
          method: 'POST',
          path: '/v3/kv/put',
          body: { key: b64(this.key(n)), value: b64(String(n)) },
          timeoutMs: 2000,
        });
        if (answer.status !== 200) throw new Error(`HTTP ${answer.status} ${answer.text.slice(0, 200)}`);
        this.acks.push({ n, at: Date.now() });
      } catch {
        this.failures += 1;
        endpoint += 1;
      }
      await sleep(this.pauseMs);
    }
  }
}

/** Every key under `prefix` and its value, read linearizably from the etcd at `url`. */
export async function readPrefix(url: string, prefix: string): Promise<Map<string, string>> {
  const end = Buffer.from(prefix);
  end[end.length - 1] += 1;
  const answer = await call(url, {
    method: 'POST',
    path: '/v3/kv/range',
    body: { key: b64(prefix), range_end: end.toString('base64') },
    timeoutMs: 10_000,
  });
  if (answer.status !== 200) throw new Error(`range ${prefix} at ${url}: HTTP ${answer.status} ${answer.text.slice(0, 200)}`);
  const kvs = (answer.json?.kvs ?? []) as Array<{ key: string; value?: string }>;
  return new Map(kvs.map((kv) => [Buffer.from(kv.key, 'base64').toString(), Buffer.from(kv.value ?? '', 'base64').toString()]));
}

/** etcd's `/version`: the server's own version and the cluster version it has applied (`etcdcluster`). */
export async function etcdVersions(url: string): Promise<{ server: string; cluster: string; storage?: string }> {
  const answer = await call(url, { method: 'GET', path: '/version', timeoutMs: 2000 });
  if (answer.status !== 200) throw new Error(`${url}/version: HTTP ${answer.status}`);
  return { server: answer.json.etcdserver, cluster: answer.json.etcdcluster, storage: answer.json.storage };
}

/** One `/v1/health` answer: when it was asked and answered, its status and when its observation started. */
export interface HealthAnswer {
  agent: string;
  sentAt: number;
  at: number;
  status: string;
  /** When the observation began (the answer's `observedAt`); undefined for `unknown` or no answer. */
  observedAt?: number;
  body?: unknown;
}

/** One roleProbe answer of one agent: the role, or the kbagent error it answered. */
export interface RoleAnswer {
  agent: string;
  sentAt: number;
  at: number;
  role?: string;
  error?: string;
}

/**
 * Polls `/v1/health` on the agent `target()` names (every `healthEveryMs`, one call at a time) and
 * roleProbe on every agent `agents()` lists (every `roleEveryMs`), recording each answer.
 */
export class HealthCaller {
  readonly health: HealthAnswer[] = [];
  readonly roles: RoleAnswer[] = [];
  private stopped = false;
  private loops: Array<Promise<void>> = [];

  constructor(
    private readonly target: () => { name: string; url: string },
    private readonly agents: () => Array<{ name: string; url: string }>,
    private readonly healthEveryMs = 100,
    private readonly roleEveryMs = 300,
  ) {}

  start(): this {
    this.loops = [this.healthLoop(), this.roleLoop()];
    return this;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  /**
   * Resolves once this caller has recorded an answer from an observation begun at or after `at`
   * (epoch ms): a member stopped until then has at least one observation made while it was down, in
   * this caller's own record (the upgrade test's `observedSince` asks the agent itself, and its answer
   * is not recorded here). The agent serves an observation for up to its max age (1 s) and starts the
   * next one about as often, so a stop shorter than that may otherwise see none begin. `timeoutMs` is
   * a patience (helpers/eventually.ts: TEST_TIME_SCALE lengthens it).
   */
  async recordedObservationSince(at: number, timeoutMs = 10_000): Promise<void> {
    const waitMs = patience(timeoutMs);
    const until = Date.now() + waitMs;
    while (!this.health.some((a) => a.observedAt !== undefined && a.observedAt >= at)) {
      if (this.stopped || Date.now() > until)
        throw new Error(`no /v1/health answer observed since ${new Date(at).toISOString()} within ${waitMs} ms`);
      await sleep(this.healthEveryMs);
    }
  }

  /** The health answers whose status is `status`, or counts per status. */
  countByStatus(answers: HealthAnswer[] = this.health): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const a of answers) counts[a.status] = (counts[a.status] ?? 0) + 1;
    return counts;
  }

  private async healthLoop(): Promise<void> {
    while (!this.stopped) {
      const { name, url } = this.target();
      const sentAt = Date.now();
      try {
        const answer = await call(url, { method: 'GET', path: '/v1/health', timeoutMs: 5000 });
        const observed = answer.json?.observedAt;
        this.health.push({
          agent: name,
          sentAt,
          at: Date.now(),
          status: String(answer.json?.status ?? `HTTP ${answer.status}`),
          ...(typeof observed === 'string' ? { observedAt: Date.parse(observed) } : {}),
          body: answer.json,
        });
      } catch (err) {
        this.health.push({ agent: name, sentAt, at: Date.now(), status: `no answer (${(err as Error).message})` });
      }
      await sleep(this.healthEveryMs);
    }
  }

  private async roleLoop(): Promise<void> {
    while (!this.stopped) {
      await Promise.all(
        this.agents().map(async ({ name, url }) => {
          const sentAt = Date.now();
          try {
            const answer = await call(url, { method: 'POST', path: '/v1.0/action', body: { action: 'roleProbe' }, timeoutMs: 5000 });
            const output = answer.json?.output;
            this.roles.push(
              typeof output === 'string'
                ? { agent: name, sentAt, at: Date.now(), role: Buffer.from(output, 'base64').toString() }
                : { agent: name, sentAt, at: Date.now(), error: `${answer.json?.error}: ${answer.json?.message}` },
            );
          } catch (err) {
            this.roles.push({ agent: name, sentAt, at: Date.now(), error: `no answer (${(err as Error).message})` });
          }
        }),
      );
      await sleep(this.roleEveryMs);
    }
  }
}
