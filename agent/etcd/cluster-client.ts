/**
 * The cluster client: the only place that talks to etcd. Every call carries a deadline and goes to
 * the configured endpoints and the client URLs of the last member list, failing over from one to
 * the next (endpoints.ts); transient failures are retried here inside that deadline (etcd3's own
 * retries and breakers are off so they do not stack). Every etcd3 client is built by `build`, the
 * one place where connection options (TLS, credentials) are turned into a client.
 */
import * as fs from 'node:fs';
import pRetry from 'p-retry';
import { noop } from 'cockatiel';
import type { Etcd3, IMember, IMemberListResponse, IOptions, Lease } from 'etcd3';
import { Deadline } from '../deadline';
import type { Logger } from '../observability/logger';
import type { Member, MemberList, MemberStatus } from '../proto/types';
import { EtcdCredentials } from './credentials';
import { EndpointCall, EndpointSet, isWrongEndpoint } from './endpoints';
import { etcd3 } from './etcd3-module';
import { retryTransient, shuttingDownError, toAgentError } from './errors';
import { fetchPeerMembers } from './peer-members';
import { RetiringClients, Unpin } from './retiring-clients';

/** How the agent reaches etcd: endpoints, TLS and credentials (CONTRACT §2). */
export interface EtcdConnectionOptions {
  endpoints: string[];
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  username?: string;
  passwordFile?: string;
  /** Longest single attempt of a cluster-wide call; the call's deadline caps it further. */
  attemptTimeoutMs?: number;
  /** ETCD_AGENT_KEY_PREFIX: the linearizable barrier read of `listMembers` reads a key below it. */
  keyPrefix?: string;
  /**
   * Peer URLs whose listener serves the member list (`GET <peer URL>/members`): this pod's own
   * member's, so that a learner's agent finds the voters (etcd 3.4 refuses a learner MemberList).
   */
  peerURLs?: string[];
  /** Where a rejected or reloaded TLS rotation is logged. */
  logger?: Logger;
  /** How often the TLS files are looked at for a rotation (default 1000 ms). */
  credentialsReloadMs?: number;
}

/** Longest wait for a peer listener's member list. */
const PEER_LIST_MS = 1000;

/** A membership RPC kind, as counted by `etcd_agent_membership_changes_total{kind}`. */
export type ChangeKind = 'add' | 'remove' | 'promote' | 'move-leader';

/** Called when each membership RPC sent has its answer: `ok`, or the AgentError code it failed with. */
export type ChangeListener = (kind: ChangeKind, result: string) => void;

/** Called when each Status call has its answer: `ok`, or the AgentError code it failed with. */
export type StatusListener = (result: string) => void;

/** A lease granted for the membership lock, and the pin that keeps its client open across a TLS rotation. */
export interface GrantedLease {
  lease: Lease;
  id: string;
  /** Releases the pin on the client the lease lives on (after the lease is revoked or given up). */
  unpin: Unpin;
}

/** An etcd alarm as `etcdctl alarm list` shows it. */
export interface Alarm {
  memberId: string;
  alarm: string;
}

/** `ID` as etcd sends it (a decimal uint64 string) → lowercase hex as etcdctl prints it. */
export function hexId(id: string | number | bigint): string {
  return BigInt(id).toString(16);
}

/** Lowercase hex id → the decimal string etcd3 expects on the wire. */
export function wireId(hex: string): string {
  return BigInt(`0x${hex}`).toString(10);
}

/** etcd's member → the agent's member shape. */
export function toMember(m: IMember): Member {
  return {
    id: hexId(m.ID),
    name: m.name,
    peerURLs: m.peerURLs ?? [],
    clientURLs: m.clientURLs ?? [],
    isLearner: m.isLearner === true,
    // etcd reports an added-but-never-started member with no name and no client URLs.
    started: m.name !== '',
  };
}

/** etcd's MemberList answer → the agent's member list, ids in hex. */
export function toMemberList(res: IMemberListResponse): MemberList {
  return {
    clusterId: hexId(res.header.cluster_id),
    answeredBy: hexId(res.header.member_id),
    raftTerm: Number(res.header.raft_term),
    members: res.members.map(toMember),
  };
}

/** A client of one etcd cluster, through its configured endpoints and the client URLs its members report. */
export class EtcdCluster {
  private readonly perEndpoint = new Map<string, Etcd3>();
  /** Per-endpoint clients that send no etcd credentials, for Status (see `memberStatus`). */
  private readonly anonymous = new Map<string, Etcd3>();
  private readonly attemptTimeoutMs: number;
  private readonly barrierKey: Buffer;
  private readonly endpoints: EndpointSet;
  /** Every client URL a member list has shown, to close the connections of members that left. */
  private readonly everReported = new Set<string>();
  /** Peer URLs of the members of the last member list: where a learner's agent can read the list. */
  private knownPeerURLs: string[] = [];
  /** Client URL of each started member by hex id, from the last member list (to find the leader's endpoint). */
  private clientURLById = new Map<string, string>();
  private closed = false;
  /** The TLS material in use, re-read when its files change (undefined without ETCD_AGENT_ETCD_CA_FILE). */
  private readonly credentials?: EtcdCredentials;
  /** Clients built with earlier credentials, closed once the calls on them are done. */
  private readonly retiring: RetiringClients;

  constructor(
    private readonly options: EtcdConnectionOptions,
    private readonly onChange: ChangeListener = () => undefined,
    private readonly onStatusCall: StatusListener = () => undefined,
  ) {
    this.attemptTimeoutMs = options.attemptTimeoutMs ?? 3000;
    this.barrierKey = Buffer.from(`${options.keyPrefix ?? '/etcd-lifecycle-agent/'}barrier`);
    this.endpoints = new EndpointSet(options.endpoints, (url) => this.endpointClient(url));
    if (options.caFile !== undefined) {
      const { caFile, certFile, keyFile } = options;
      this.credentials = new EtcdCredentials({ caFile, certFile, keyFile }, { logger: options.logger, intervalMs: options.credentialsReloadMs });
      this.credentials.onChange(() => this.renewClients());
      this.credentials.start();
    }
    // An attempt lasts at most 2 × attemptTimeoutMs (a membership RPC): calls sent just before a
    // rotation finish on the old clients; a held lock pins its client for as long as it is held.
    this.retiring = new RetiringClients({ graceMs: this.attemptTimeoutMs * 2 + 1000 });
  }

  /**
   * New credentials are in use: later calls go through new clients (etcd3 takes TLS credentials at
   * construction), and the old ones are retired, closed once the calls already on them are done.
   */
  private renewClients(): void {
    if (this.closed) return;
    this.retiring.retire([...this.perEndpoint.values(), ...this.anonymous.values()]);
    this.perEndpoint.clear();
    this.anonymous.clear();
  }

  /** A client of the endpoint a call would go to now (for tests and tools; the agent's own calls fail over). */
  get raw(): Etcd3 {
    return this.endpointClient(this.endpoints.best());
  }

  /** Endpoints in the order the next call tries them (configured and reported, the last good one first). */
  endpointOrder(): string[] {
    return this.endpoints.ordered();
  }

  /**
   * The linearizable member list. etcd 3.4 answers MemberList from the asked
   * member's own applied state (the `linearizable` flag only works from 3.5,
   * etcd-io/etcd#11639), so a linearizable read on the same member comes first:
   * once it returns, that member has applied everything committed before it,
   * membership changes included. Asked of one endpoint at a time, a further one
   * joining every 200 ms without an answer, so one frozen member costs 200 ms,
   * not a whole attempt.
   */
  async listMembers(deadline: Deadline): Promise<MemberList> {
    return this.read(deadline, async (client, at) => {
      await client.kv.range({ key: this.barrierKey, count_only: true }, { deadline: at });
      const res = await client.cluster.memberList({ linearizable: true }, { deadline: at });
      const list = toMemberList(res);
      this.learn(list.members);
      return list;
    });
  }

  /** A read (idempotent), hedged over the endpoints and retried on transient failure inside `deadline`. */
  read<T>(deadline: Deadline, fn: EndpointCall<T>, attemptMs = this.attemptTimeoutMs): Promise<T> {
    return this.retrying(deadline, () => this.anyEndpoint(deadline, () => this.endpoints.hedged(deadline, attemptMs, fn)));
  }

  /**
   * A write that is safe to repeat (a put, a create-if-absent transaction, a lease call), sent to one
   * endpoint at a time, failing over to the next, and retried on transient failure inside `deadline`.
   */
  write<T>(deadline: Deadline, fn: EndpointCall<T>, attemptMs = this.attemptTimeoutMs): Promise<T> {
    return this.retrying(deadline, () => this.anyEndpoint(deadline, () => this.endpoints.failover(deadline, attemptMs, fn)));
  }

  /**
   * Grants a lease of `ttlSeconds`, kept alive by the client of the endpoint that granted it; that
   * client is pinned, so a TLS rotation does not close it under the lease, until `unpin`.
   */
  grantLease(ttlSeconds: number, deadline: Deadline, attemptMs = this.attemptTimeoutMs): Promise<GrantedLease> {
    return this.write(
      deadline,
      async (client, at) => {
        const lease = client.lease(ttlSeconds, { deadline: at });
        // A lost lease is seen by the lock that holds it; an unhandled 'lost' must not crash the agent.
        lease.on('lost', () => undefined);
        const unpin = this.retiring.pin(client);
        try {
          return { lease, id: await lease.grant(), unpin };
        } catch (err) {
          lease.release();
          unpin();
          throw err;
        }
      },
      attemptMs,
    );
  }

  /**
   * The member list as the member at `clientURL` reports it, asked there alone within `timeoutMs`
   * (no retries). For when the configured endpoints cannot answer: down, or a learner, which etcd
   * 3.4 refuses MemberList ("rpc not supported for learner").
   */
  async memberListAt(clientURL: string, timeoutMs: number): Promise<MemberList> {
    const client = this.endpointClient(clientURL);
    try {
      const res = await client.cluster.memberList({ linearizable: true }, { deadline: new Date(Date.now() + timeoutMs) });
      const list = toMemberList(res);
      this.learn(list.members);
      return list;
    } catch (err) {
      throw toAgentError(err);
    }
  }

  /** MemberAdd; answers the new member as etcd reports it (unstarted). */
  async addMember(peerURLs: string[], isLearner: boolean, deadline: Deadline): Promise<Member> {
    // Not retried: a lost answer is recovered by the caller's next read of the member list.
    return this.once(deadline, 'add', this.endpoints.best(), async (client, at) => {
      const res = await client.cluster.memberAdd({ peerURLs, isLearner }, { deadline: at });
      return toMember(res.member);
    });
  }

  /** MemberRemove by hex id. */
  async removeMember(id: string, deadline: Deadline): Promise<void> {
    await this.once(deadline, 'remove', this.endpoints.best(), (client, at) => client.cluster.memberRemove({ ID: wireId(id) }, { deadline: at }));
  }

  /**
   * MemberPromote by hex id (etcd refuses until the learner is in sync). With etcd authentication
   * it goes to the leader's own endpoint: a follower forwards a promote to the leader without the
   * caller's credentials, the leader refuses it ("auth: user name is empty") and the follower retries
   * until the call's deadline (etcd-io/etcd#20757, not fixed in 3.4).
   */
  async promoteMember(id: string, deadline: Deadline): Promise<void> {
    const url = this.options.username === undefined ? this.endpoints.best() : await this.leaderURL(deadline);
    await this.once(deadline, 'promote', url, (client, at) => client.cluster.memberPromote({ ID: wireId(id) }, { deadline: at }));
  }

  /** MoveLeader, sent to the current leader's own endpoint as etcd requires. */
  async moveLeader(leaderClientURL: string, targetId: string, deadline: Deadline): Promise<void> {
    await this.once(deadline, 'move-leader', leaderClientURL, (client, at) =>
      client.maintenance.moveLeader({ targetID: wireId(targetId) }, { deadline: at }),
    );
  }

  /**
   * Maintenance.Status of one member, asked at that member's own client URL, within `timeoutMs`.
   * Sent without etcd credentials: etcd (3.4) checks no permission on Status, while a learner
   * refuses Authenticate ("rpc not supported for learner"), and an Authenticate to a frozen
   * member would hold the call for a whole attempt instead of `timeoutMs`.
   */
  async memberStatus(clientURL: string, timeoutMs: number): Promise<MemberStatus> {
    const client = this.endpointClient(clientURL, false);
    const started = performance.now();
    try {
      const res = await client.maintenance.status({ deadline: new Date(Date.now() + timeoutMs) });
      this.onStatusCall('ok');
      return {
        memberId: hexId(res.header.member_id),
        leaderId: hexId(res.leader),
        raftTerm: Number(res.raftTerm),
        raftIndex: Number(res.raftIndex),
        raftAppliedIndex: Number(res.raftAppliedIndex),
        dbSizeBytes: Number(res.dbSize),
        isLearner: res.isLearner === true,
        version: res.version,
        errors: res.errors ?? [],
        latencyMs: Math.round((performance.now() - started) * 100) / 100,
      };
    } catch (err) {
      const error = toAgentError(err);
      this.onStatusCall(error.code);
      throw error;
    }
  }

  /** Active alarms (NOSPACE, CORRUPT) across the cluster. */
  async alarms(deadline: Deadline): Promise<Alarm[]> {
    return this.read(deadline, async (client, at) => {
      const res = await client.maintenance.alarm({ action: 'Get', memberID: 0, alarm: 'None' }, { deadline: at });
      return res.alarms.map((a) => ({ memberId: hexId(a.memberID), alarm: String(a.alarm).toUpperCase() }));
    });
  }

  /** Closes every connection; later calls fail as `unavailable`. */
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
   * `call` through the known endpoints; when none of them can serve it (all down, or learners),
   * reads the member list at a peer listener to find the others, and tries once more.
   */
  private async anyEndpoint<T>(deadline: Deadline, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (!isWrongEndpoint(err) || deadline.expired() || !(await this.discover(deadline))) throw err;
      return call();
    }
  }

  /**
   * Reads the member list at a peer listener (this pod's member's, then those of the last list)
   * and adds the client URLs of its started members to the endpoints; true when that added any.
   */
  private async discover(deadline: Deadline): Promise<boolean> {
    const peers = [...new Set([...(this.options.peerURLs ?? []), ...this.knownPeerURLs])];
    if (peers.length === 0) return false;
    const ms = Math.min(PEER_LIST_MS, deadline.remainingMs());
    const tls = { caFile: this.options.caFile, certFile: this.options.certFile, keyFile: this.options.keyFile };
    let members: Member[];
    try {
      members = await Promise.any(peers.map((url) => fetchPeerMembers(url, ms, tls)));
    } catch {
      return false;
    }
    const before = new Set(this.endpoints.ordered());
    this.learn(members);
    return this.endpoints.ordered().some((url) => !before.has(url));
  }

  /** Takes in a member list: its voters' client URLs become endpoints, its peer URLs places to discover from. */
  private learn(members: Member[]): void {
    const voters = members.filter((m) => m.started && !m.isLearner);
    this.endpoints.setReported(voters.flatMap((m) => m.clientURLs));
    this.knownPeerURLs = members.flatMap((m) => m.peerURLs);
    this.forgetRemoved(members);
    this.clientURLById = new Map(members.filter((m) => m.clientURLs.length > 0).map((m) => [m.id, m.clientURLs[0]]));
  }

  /** The leader's own client URL, as the best endpoint reports it; else the best endpoint. */
  private async leaderURL(deadline: Deadline): Promise<string> {
    const asked = this.endpoints.best();
    try {
      const status = await this.endpointClient(asked, false).maintenance.status({ deadline: deadline.capped(1000) });
      return this.clientURLById.get(hexId(status.leader)) ?? asked;
    } catch {
      // The promote itself will say what is wrong with etcd.
      return asked;
    }
  }

  /**
   * Closes the connections to client URLs that a member used to report and no member reports now
   * (a removed member), so channels to departed members do not pile up and keep reconnecting.
   */
  private forgetRemoved(members: Member[]): void {
    const now = new Set(members.flatMap((m) => m.clientURLs));
    for (const url of this.everReported) {
      if (now.has(url) || this.endpoints.isConfigured(url)) continue;
      this.everReported.delete(url);
      for (const clients of [this.perEndpoint, this.anonymous]) {
        clients.get(url)?.close();
        clients.delete(url);
      }
      this.endpoints.forget(url);
    }
    for (const url of now) this.everReported.add(url);
  }

  /** The client of exactly one endpoint (built once, kept); etcd credentials unless `authenticated` is false. */
  private endpointClient(url: string, authenticated = true): Etcd3 {
    if (this.closed) throw shuttingDownError();
    const clients = authenticated ? this.perEndpoint : this.anonymous;
    let client = clients.get(url);
    if (client === undefined) {
      client = this.build(url, authenticated);
      clients.set(url, client);
    }
    return client;
  }

  /**
   * Builds the etcd3 client of one endpoint: TLS always when a CA is set, etcd credentials unless
   * `authenticated` is false, no retries and no circuit breaker (fail-over and retries are ours).
   * The one place an etcd3 client is made, and so where etcd3 (and gRPC) are loaded, on the first
   * call that needs etcd, not at start (etcd3-module.ts).
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

  /** One attempt of a membership RPC at `url`, counted whether or not etcd accepted it. */
  private async once<T>(deadline: Deadline, kind: ChangeKind, url: string, fn: EndpointCall<T>): Promise<T> {
    deadline.check(`sending ${kind}`);
    try {
      const value = await fn(this.endpointClient(url), deadline.capped(this.attemptTimeoutMs * 2));
      this.endpoints.succeeded(url);
      this.onChange(kind, 'ok');
      return value;
    } catch (err) {
      // The caller reads the member list again before any retry, and that read skips `url` now.
      this.endpoints.failed(url, err);
      const error = toAgentError(err);
      this.onChange(kind, error.code);
      throw error;
    }
  }

  /** A call, retried on transient failure while the deadline allows another attempt. */
  private async retrying<T>(deadline: Deadline, fn: () => Promise<T>): Promise<T> {
    try {
      return await pRetry(fn, retryTransient(deadline, { minTimeout: 50, maxTimeout: 400, reserveMs: 100 }));
    } catch (err) {
      throw toAgentError(err);
    }
  }
}
