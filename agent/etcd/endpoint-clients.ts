/**
 * The etcd3 clients of the cluster client, one per endpoint (and one without etcd credentials, for
 * Status), built with the TLS material in use. The one place an etcd3 client is made: when the TLS
 * files change, later calls get new clients and the old ones are retired (retiring-clients.ts).
 */
import * as fs from 'node:fs';
import { noop } from 'cockatiel';
import type { Etcd3, IOptions } from 'etcd3';
import type { EtcdConnectionOptions } from './connection-options';
import { EtcdCredentials } from './credentials';
import { etcd3 } from './etcd3-module';
import { shuttingDownError } from './errors';
import { RetiringClients, Unpin } from './retiring-clients';

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

  constructor(
    private readonly options: EtcdConnectionOptions,
    private readonly attemptTimeoutMs: number,
  ) {
    if (options.caFile !== undefined) {
      const { caFile, certFile, keyFile } = options;
      this.credentials = new EtcdCredentials({ caFile, certFile, keyFile }, { logger: options.logger, intervalMs: options.credentialsReloadMs });
      this.credentials.onChange(() => this.renew());
      this.credentials.start();
    }
    // An attempt lasts at most 2 × attemptTimeoutMs (a membership RPC): calls sent just before a
    // rotation finish on the old clients; a held lock pins its client for as long as it is held.
    this.retiring = new RetiringClients({ graceMs: this.attemptTimeoutMs * 2 + 1000 });
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
      clients.get(url)?.close();
      clients.delete(url);
    }
  }

  /** Closes every client, retired ones too; later calls fail as `unavailable`. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.credentials?.stop();
    this.retiring.closeAll();
    for (const client of [...this.perEndpoint.values(), ...this.anonymous.values()]) client.close();
    this.perEndpoint.clear();
    this.anonymous.clear();
  }

  /**
   * New credentials are in use: later calls go through new clients (etcd3 takes TLS credentials at
   * construction), and the old ones are retired, closed once the calls already on them are done.
   */
  private renew(): void {
    if (this.closed) return;
    this.retiring.retire([...this.perEndpoint.values(), ...this.anonymous.values()]);
    this.perEndpoint.clear();
    this.anonymous.clear();
  }

  /**
   * Builds the etcd3 client of one endpoint: TLS always when a CA is set, etcd credentials unless
   * `authenticated` is false, no retries and no circuit breaker (fail-over and retries are the
   * cluster client's). etcd3 (and gRPC) are loaded here, on the first call that needs etcd, not at
   * start (etcd3-module.ts).
   */
  private build(url: string, authenticated: boolean): Etcd3 {
    const o = this.options;
    const options: IOptions = { hosts: [url], dialTimeout: this.attemptTimeoutMs, faultHandling: { global: noop, host: () => noop } };
    if (this.credentials !== undefined) {
      const { ca, cert, key } = this.credentials.current();
      options.credentials = { rootCertificate: ca, ...(cert !== undefined && key !== undefined ? { certChain: cert, privateKey: key } : {}) };
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
