/**
 * A record of an agent's health answers, asked one after another while a test changes the cluster
 * under them: each with when it was sent and received, and when its observation began
 * (`observedAt`, docs/api.md §4). A test then judges the answers by their observations against the
 * moments it recorded (a member stopped, started again), not by how soon an answer changed: an
 * observation that began after a member stopped cannot have heard it.
 */
import { eventually } from './eventually';
import { call } from './http-call';

/** One health answer. */
export interface HealthAnswer {
  sentAt: number;
  at: number;
  /** The HTTP status; 0 when no answer came. */
  http: number;
  /** The body's `status` (healthy, degraded, unavailable, unknown), or undefined without one. */
  status?: string;
  /** When the observation began (epoch ms); undefined for `unknown` or no answer. */
  observedAt?: number;
  ageMs?: number;
  // The answer's JSON as the agent sent it: each test reads the fields it judges.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json?: any;
  error?: string;
}

/** Asks `path` of the agent at `url` in a loop, `everyMs` apart, until stopped, keeping every answer. */
export class HealthRecorder {
  readonly answers: HealthAnswer[] = [];
  private stopped = false;
  private loop?: Promise<void>;

  constructor(
    private readonly url: string,
    private readonly path = '/v1/health',
    private readonly everyMs = 20,
  ) {}

  start(): this {
    this.loop = this.run();
    return this;
  }

  /** Ends the loop after the call in flight; answers every answer recorded. */
  async stop(): Promise<HealthAnswer[]> {
    this.stopped = true;
    await this.loop;
    return this.answers;
  }

  /** The answers whose observation began at or after `from` and that were received by `to` (when given). */
  observedBetween(from: number, to = Infinity): HealthAnswer[] {
    return this.answers.filter((a) => a.observedAt !== undefined && a.observedAt >= from && a.at <= to);
  }

  /** Waits (a patience: helpers/eventually.ts) for a recorded answer that `ok` accepts, and answers it. */
  waitFor(ok: (a: HealthAnswer) => boolean, within = 15_000): Promise<HealthAnswer> {
    return eventually(
      () => {
        const found = this.answers.find(ok);
        if (found !== undefined) return found;
        const last = this.answers[this.answers.length - 1];
        throw new Error(`no such answer yet; the last: ${last === undefined ? 'none' : JSON.stringify(last).slice(0, 600)}`);
      },
      { within, every: 20 },
    );
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const sentAt = Date.now();
      try {
        const answer = await call(this.url, { method: 'GET', path: this.path, timeoutMs: 30_000 });
        const observed = answer.json?.observedAt;
        this.answers.push({
          sentAt,
          at: Date.now(),
          http: answer.status,
          status: typeof answer.json?.status === 'string' ? answer.json.status : undefined,
          ...(typeof observed === 'string' ? { observedAt: Date.parse(observed) } : {}),
          ...(typeof answer.json?.ageMs === 'number' ? { ageMs: answer.json.ageMs } : {}),
          json: answer.json,
        });
      } catch (err) {
        this.answers.push({ sentAt, at: Date.now(), http: 0, error: (err as Error).message });
      }
      await new Promise((resolve) => setTimeout(resolve, this.everyMs));
    }
  }
}
