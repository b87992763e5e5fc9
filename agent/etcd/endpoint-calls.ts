/**
 * How a call of the cluster client reaches etcd: to the configured endpoints and the client URLs
 * of the last member list (endpoints.ts), failing over from one to the next, and when none of them
 * can serve it, to the members a peer listener names (member-discovery.ts).
 *
 * Invariant: every call carries a deadline, and transient failures are retried here, inside that
 * deadline and nowhere else (etcd3's own retries and breakers are off, so they do not stack). A
 * stop waits for the calls in flight (`settled`), so no retry pause outlives it.
 */
import pRetry from 'p-retry';
import type { Etcd3 } from 'etcd3';
import type { Deadline } from '../lib/deadline';
import type { EtcdConnectionOptions } from './connection-options';
import { EndpointClients } from './endpoint-clients';
import { EndpointCall, EndpointSet, isWrongEndpoint } from './endpoints';
import { retryTransient, toAgentError, type RetryPacing } from './errors';
import { MemberDiscovery } from './member-discovery';

/** Pause between attempts of a call (50 ms, growing to 400 ms), and the least time left on its deadline for another. */
const RETRY_PACING: RetryPacing = { minTimeout: 50, maxTimeout: 400, reserveMs: 100 };

/** The endpoints of one cluster, their clients, and the retried, failing-over calls made through them. */
export class EndpointCalls {
  readonly endpoints: EndpointSet;
  readonly clients: EndpointClients;
  readonly discovery: MemberDiscovery;
  /** Calls in `retrying` now: a stop waits for them (`settled`), so no retry pause outlives it. */
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(
    options: EtcdConnectionOptions,
    private readonly attemptTimeoutMs: number,
  ) {
    this.endpoints = new EndpointSet(options.endpoints, (url) => this.client(url));
    this.clients = new EndpointClients(options, this.attemptTimeoutMs);
    this.discovery = new MemberDiscovery(options, this.endpoints, this.clients);
  }

  /** The client of exactly one endpoint (built once, kept); etcd credentials unless `authenticated` is false. */
  client(url: string, authenticated = true): Etcd3 {
    return this.clients.get(url, authenticated);
  }

  /** A read (idempotent), hedged over the endpoints and retried on transient failure inside `deadline`. */
  read<T>(deadline: Deadline, fn: EndpointCall<T>, attemptMs = this.attemptTimeoutMs): Promise<T> {
    return this.retrying(deadline, () => this.anyEndpoint(deadline, () => this.endpoints.hedged(deadline, attemptMs, fn)));
  }

  /** A write that is safe to repeat, sent to one endpoint at a time, failing over, and retried on transient failure inside `deadline`. */
  write<T>(deadline: Deadline, fn: EndpointCall<T>, attemptMs = this.attemptTimeoutMs): Promise<T> {
    return this.retrying(deadline, () => this.anyEndpoint(deadline, () => this.endpoints.failover(deadline, attemptMs, fn)));
  }

  /** Closes every connection; later calls fail as `unavailable`. */
  close(): void {
    this.clients.close();
  }

  /**
   * Settles once every call in flight now has ended. After `close` that is within one retry pause
   * (`RETRY_PACING.maxTimeout` at most): the next attempt fails as shutting down, which is never retried.
   */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
  }

  /**
   * `call` through the known endpoints; when none of them can serve it (all down, or learners),
   * reads the member list at a peer listener to find the others, and tries once more.
   */
  private async anyEndpoint<T>(deadline: Deadline, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (!isWrongEndpoint(err) || deadline.expired() || !(await this.discovery.discover(deadline))) throw err;
      return call();
    }
  }

  /** A call, retried on transient failure while the deadline allows another attempt. */
  private async retrying<T>(deadline: Deadline, fn: () => Promise<T>): Promise<T> {
    const call = pRetry(fn, retryTransient(deadline, RETRY_PACING));
    this.inFlight.add(call);
    try {
      return await call;
    } catch (err) {
      throw toAgentError(err);
    } finally {
      this.inFlight.delete(call);
    }
  }
}
