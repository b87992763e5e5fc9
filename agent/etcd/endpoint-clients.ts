/**
 * The etcd3 clients of the cluster client, one per endpoint (and one without etcd credentials, for
 * Status), built with the TLS material in use. The one place an etcd3 client is made: when the TLS
 * files change, later calls get new clients and the old ones are retired (retiring-clients.ts).
 *
 * Invariant: a rotation never leaves a call waiting on a connection it did not need. Each endpoint's
 * new client is built at once and connects (TLS handshake, etcd's Authenticate) with one Status call
 * of its own; calls go on through the old client until that call has settled (answered or failed, at
 * most one attempt timeout), then through the new one, and the old one is retired. Otherwise the
 * first calls after a rotation would pay for the handshake inside their status budget
 * (ETCD_AGENT_STATUS_TIMEOUT_MS), fail when it takes longer, and /v1/health would answer
 * `unavailable` until the new clients were connected.
 */
import * as fs from 'node:fs';
import { noop } from 'cockatiel';
import type { Etcd3, IOptions } from 'etcd3';
import type { EtcdConnectionOptions } from './connection-options';
import { EtcdCredentials } from './credentials';
import { etcd3 } from './etcd3-module';
import { shuttingDownError } from './errors';
import { RetiringClients, Unpin } from './retiring-clients';

/** Beyond a call's longest attempt, how long a retired client stays open so that its answer still gets back. */
const RETIRE_GRACE_MARGIN_MS = 1000;

/**
 * gRPC's wait between connection attempts to an endpoint that refused or dropped them, shared by
 * every client of that endpoint in the process. gRPC's default grows from 1 s to 120 s, so after an
 * outage a restarted etcd would go on being reported unreachable (and `/v1/health/local`, a
 * readiness probe, would fail) for up to that long after it answers again. A refused connection is
 * cheap; an attempt at least every second keeps that lag within one default health max age.
 */
export const RECONNECT_BACKOFF_MS = { initial: 100, max: 1000 } as const;

/** The clients of each endpoint, built once and kept until a TLS rotation, a removed member or `close`. */
export class EndpointClients {
  private readonly perEndpoint = new Map<string, Etcd3>();
  /** Per-endpoint clients that send no etcd credentials, for Status (see `EtcdCluster.memberStatus`). */
  private readonly anonymous = new Map<string, Etcd3>();
  private closed = false;
  /** The TLS material in use, re-read when its files change (undefined without ETCD_AGENT_ETCD_CA_FILE). */
  private readonly credentials?: EtcdCredentials;
  /** Clients built with earlier credentials, closed once the calls on them are done. */
  private readonly retiring: RetiringClients;
  /** New clients of a rotation still connecting, by the client they replace once connected. */
  private readonly warming = new Map<Etcd3, Etcd3>();

  constructor(
    private readonly options: EtcdConnectionOptions,
    private readonly attemptTimeoutMs: number,
  ) {
    if (options.caFile !== undefined) {
      const { caFile, certFile, keyFile } = options;
      this.credentials = new EtcdCredentials(
        { caFile, certFile, keyFile },
        { logger: options.logger, intervalMs: options.credentialsReloadMs },
      );
      this.credentials.onChange(() => this.renew());
      this.credentials.start();
    }
    // An attempt lasts at most 2 × attemptTimeoutMs (a membership RPC): calls sent just before a
    // rotation finish on the old clients; a held lock pins its client for as long as it is held.
    this.retiring = new RetiringClients({ graceMs: this.attemptTimeoutMs * 2 + RETIRE_GRACE_MARGIN_MS });
  }

  /** The client of exactly one endpoint (built once, kept); etcd credentials unless `authenticated` is false. */
  get(url: string, authenticated = true): Etcd3 {
    if (this.closed) throw shuttingDownError();
    const clients = authenticated ? this.perEndpoint : this.anonymous;
    let client = clients.get(url);
    if (client === undefined) {
      client = this.build(url, authenticated);
      clients.set(url, client);
    }
    return client;
  }

  /** Keeps `client` open across a TLS rotation until the returned function is called. */
  pin(client: Etcd3): Unpin {
    return this.retiring.pin(client);
  }

  /** Closes the clients of `url` (a member that left); a later call there builds new ones. */
  drop(url: string): void {
    for (const clients of [this.perEndpoint, this.anonymous]) {
      const client = clients.get(url);
      if (client === undefined) continue;
      this.stopWarming(client);
      client.close();
      clients.delete(url);
    }
  }

  /** Closes every client, retired ones too; later calls fail as `unavailable`. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.credentials?.stop();
    this.retiring.closeAll();
    for (const next of this.warming.values()) next.close();
    this.warming.clear();
    for (const client of [...this.perEndpoint.values(), ...this.anonymous.values()]) client.close();
    this.perEndpoint.clear();
    this.anonymous.clear();
  }

  /**
   * New credentials are in use: each endpoint gets a new client (etcd3 takes TLS credentials at
   * construction), which replaces the old one once connected (the module's invariant); the old ones
   * are retired, closed once the calls already on them are done. A client still connecting from an
   * earlier rotation is closed: the newest credentials win.
   */
  private renew(): void {
    if (this.closed) return;
    for (const [authenticated, clients] of [
      [true, this.perEndpoint],
      [false, this.anonymous],
    ] as const) {
      for (const [url, old] of clients) {
        this.stopWarming(old);
        this.warm(url, authenticated, old, clients);
      }
    }
  }

  /** Builds the new client of `url`, connects it, then puts it in `old`'s place and retires `old`. */
  private warm(url: string, authenticated: boolean, old: Etcd3, clients: Map<string, Etcd3>): void {
    const next = this.build(url, authenticated);
    this.warming.set(old, next);
    const swap = (): void => {
      if (this.warming.get(old) !== next) return; // dropped, closed, or replaced by a newer rotation
      this.warming.delete(old);
      if (clients.get(url) === old) clients.set(url, next);
      else next.close();
      this.retiring.retire([old]);
    };
    next.maintenance.status({ deadline: new Date(Date.now() + this.attemptTimeoutMs) }).then(swap, swap);
  }

  /** Closes the client still connecting to replace `old`, if any. */
  private stopWarming(old: Etcd3): void {
    this.warming.get(old)?.close();
    this.warming.delete(old);
  }

  /**
   * Builds the etcd3 client of one endpoint: TLS always when a CA is set, etcd credentials unless
   * `authenticated` is false, no retries and no circuit breaker (fail-over and retries are the
   * cluster client's). etcd3 (and gRPC) are loaded here, on the first call that needs etcd, not at
   * start (etcd3-module.ts).
   */
  private build(url: string, authenticated: boolean): Etcd3 {
    const o = this.options;
    const options: IOptions = {
      hosts: [url],
      dialTimeout: this.attemptTimeoutMs,
      faultHandling: { global: noop, host: () => noop },
      grpcOptions: {
        'grpc.initial_reconnect_backoff_ms': RECONNECT_BACKOFF_MS.initial,
        'grpc.max_reconnect_backoff_ms': RECONNECT_BACKOFF_MS.max,
      },
    };
    if (this.credentials !== undefined) {
      const { ca, cert, key } = this.credentials.current();
      options.credentials = {
        rootCertificate: ca,
        ...(cert !== undefined && key !== undefined ? { certChain: cert, privateKey: key } : {}),
      };
    }
    if (authenticated && o.username !== undefined && o.passwordFile !== undefined) {
      options.auth = {
        username: o.username,
        password: fs.readFileSync(o.passwordFile, 'utf8').replace(/\r?\n$/, ''),
        // etcd3 sends Authenticate with no deadline and makes every call wait for it: a frozen
        // member would hang the client for good without one.
        callOptions: () => ({ deadline: new Date(Date.now() + this.attemptTimeoutMs) }),
      };
    }
    return new (etcd3().Etcd3)(options);
  }
}
