/**
 * Where an etcd call goes: the configured endpoints and the client URLs the last member list
 * reported, the endpoint that answered last first. An endpoint that just failed (refused, silent,
 * a learner) is tried last for a short while, so one dead or frozen member costs one attempt, not
 * every call's deadline.
 *
 * Invariant: the failure of one endpoint never stops a call from trying the others. There is no
 * breaker shared by all endpoints (one dead member must not close the door to the live ones).
 */
import type { Etcd3 } from 'etcd3';
import type { Deadline } from '../lib/deadline';
import { AgentError } from '../proto/errors';
import { etcdRefusal, isLearnerRefusal, isTransient, toAgentError } from './errors';

/** How long an endpoint that failed is tried after the others. */
const SUSPECT_MS = 1000;
/** How long one endpoint may take before the next is asked as well (hedged reads). */
const HEDGE_MS = 200;

/** An attempt of `fn` on one endpoint's client, bounded by `at`; `url` is that endpoint's. */
export type EndpointCall<T> = (client: Etcd3, at: Date, url: string) => Promise<T>;

/**
 * True when the endpoint asked cannot serve the call, but another may: unreachable, silent, or a
 * learner (read by its words, whichever gRPC code its etcd version sent: see `isLearnerRefusal`).
 */
export function isWrongEndpoint(err: unknown): boolean {
  return isTransient(err) || isLearnerRefusal(err) || etcdRefusal(err) === 'not-capable';
}

/** The endpoints of one cluster, ordered for the next call; see the module comment. */
export class EndpointSet {
  private preferred?: string;
  private reported: string[] = [];
  private readonly suspectUntil = new Map<string, number>();

  constructor(
    private readonly configured: readonly string[],
    private readonly clientOf: (url: string) => Etcd3,
  ) {}

  /** Every endpoint, the last good one first, then configured, then reported; suspects last. */
  ordered(now = Date.now()): string[] {
    const all = [...new Set([...(this.preferred === undefined ? [] : [this.preferred]), ...this.configured, ...this.reported])];
    const suspect = (url: string): boolean => (this.suspectUntil.get(url) ?? 0) > now;
    return [...all.filter((u) => !suspect(u)), ...all.filter(suspect)];
  }

  /** The endpoint to send a single (not repeatable) request to now. */
  best(): string {
    return this.ordered()[0];
  }

  /** The client URLs that the members report (voters, and discovered members): more doors to the same cluster. */
  setReported(urls: string[]): void {
    this.reported = [...new Set(urls)];
  }

  /** True when `url` is configured (its connection is kept even when no member reports it). */
  isConfigured(url: string): boolean {
    return this.configured.includes(url);
  }

  /** `url` answered: ask it first next time. */
  succeeded(url: string): void {
    this.preferred = url;
    this.suspectUntil.delete(url);
  }

  /** `url` failed with `err`: when another endpoint could do better, try `url` last for a while. */
  failed(url: string, err: unknown): void {
    if (!isWrongEndpoint(err)) return;
    this.suspectUntil.set(url, Date.now() + SUSPECT_MS);
    if (this.preferred === url) this.preferred = undefined;
  }

  /** A member that left: no longer preferred nor remembered. */
  forget(url: string): void {
    this.suspectUntil.delete(url);
    if (this.preferred === url) this.preferred = undefined;
  }

  /**
   * For reads: `fn` on one endpoint after another, a further one joining every 200 ms without an
   * answer and at once after a failure; the first answer wins.
   */
  hedged<T>(deadline: Deadline, attemptMs: number, fn: EndpointCall<T>): Promise<T> {
    const urls = this.ordered();
    return new Promise<T>((resolve, reject) => {
      const errors: unknown[] = [];
      let next = 0;
      let pending = 0;
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = (): void => {
        settled = true;
        clearTimeout(timer);
      };
      const launch = (): void => {
        clearTimeout(timer);
        if (settled || next >= urls.length) return;
        const url = urls[next++];
        pending++;
        let client: Etcd3;
        try {
          client = this.clientOf(url);
        } catch (err) {
          finish();
          reject(err);
          return;
        }
        fn(client, deadline.capped(attemptMs), url).then(
          (value) => {
            if (settled) return;
            finish();
            this.succeeded(url);
            resolve(value);
          },
          (err: unknown) => {
            pending--;
            errors.push(err);
            this.failed(url, err);
            if (settled) return;
            if (next < urls.length && !deadline.expired()) return launch();
            if (pending === 0) {
              finish();
              reject(mostTelling(errors));
            }
          },
        );
        if (next < urls.length) timer = setTimeout(launch, HEDGE_MS);
      };
      launch();
    });
  }

  /**
   * For writes: `fn` on one endpoint at a time, the next only after the previous failed in a way
   * another endpoint may not (unreachable, silent, a learner). Only for requests that are safe to
   * repeat (puts, a create-if-absent transaction, a lease grant or revoke).
   */
  async failover<T>(deadline: Deadline, attemptMs: number, fn: EndpointCall<T>): Promise<T> {
    const errors: unknown[] = [];
    for (const url of this.ordered()) {
      if (deadline.expired()) break;
      try {
        const value = await fn(this.clientOf(url), deadline.capped(attemptMs), url);
        this.succeeded(url);
        return value;
      } catch (err) {
        this.failed(url, err);
        if (!isWrongEndpoint(err)) throw err;
        errors.push(err);
      }
    }
    throw errors.length === 0 ? new AgentError('unavailable', 'no etcd endpoint could be asked before the deadline') : mostTelling(errors);
  }
}

/** A refusal that says why (bad credentials) beats "unreachable"; else the last failure. */
function mostTelling(errors: unknown[]): unknown {
  const refusal = errors.find((e) => !isWrongEndpoint(e));
  if (refusal !== undefined) return refusal;
  // A learner's refusal says less than a voter's silence: prefer the transient one for the retry rule.
  return errors.filter((e) => isTransient(e)).at(-1) ?? toAgentError(errors[errors.length - 1]);
}
