/**
 * The cluster client: the only place that talks to etcd's Cluster and
 * Maintenance services. Every call carries a deadline; transient failures are
 * retried here, once, inside that deadline (etcd3's own retries are off so
 * they do not stack).
 */
import * as fs from 'node:fs';
import pRetry from 'p-retry';
import { ConsecutiveBreaker, circuitBreaker, handleWhen, noop } from 'cockatiel';
import type { Etcd3, IMember, IMemberListResponse, IOptions } from 'etcd3';
import { Deadline } from '../deadline';
import type { Member, MemberList, MemberStatus } from '../proto/types';
import { etcd3 } from './etcd3-module';
import { isTransient, retryTransient, shuttingDownError, toAgentError } from './errors';

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
}

/** How long one endpoint may take before the next is asked as well. */
const HEDGE_MS = 200;

/** A membership RPC kind, as counted by `etcd_agent_membership_changes_total{kind}`. */
export type ChangeKind = 'add' | 'remove' | 'promote' | 'move-leader';

/** Called after each membership RPC is sent, whatever its result. */
export type ChangeListener = (kind: ChangeKind) => void;

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
  /** Options of the client of the configured endpoints, made at construction (TLS files are read then). */
  private readonly mainOptions: IOptions;
  /** That client, made on first use (see etcd3-module.ts). */
  private mainClient?: Etcd3;
  private readonly perEndpoint = new Map<string, Etcd3>();
  /** Per-endpoint clients that send no etcd credentials, for Status (see `memberStatus`). */
  private readonly anonymous = new Map<string, Etcd3>();
  private readonly attemptTimeoutMs: number;
  private readonly barrierKey: Buffer;
  /** Client URLs of the voters in the last member list: more doors to the same cluster. */
  private reported: string[] = [];
  /** Every client URL a member list has shown, to close the connections of members that left. */
  private readonly everReported = new Set<string>();
  /** Client URL of each started member by hex id, from the last member list (to find the leader's endpoint). */
  private clientURLById = new Map<string, string>();
  /** The endpoint that answered last; asked first next time, and sent membership changes. */
  private preferred?: string;
  private closed = false;

  constructor(
    private readonly options: EtcdConnectionOptions,
    private readonly onChange: ChangeListener = () => undefined,
    private readonly onStatusCall: () => void = () => undefined,
  ) {
    this.attemptTimeoutMs = options.attemptTimeoutMs ?? 3000;
    this.barrierKey = Buffer.from(`${options.keyPrefix ?? '/etcd-lifecycle-agent/'}barrier`);
    this.mainOptions = {
      ...this.baseOptions(options.endpoints),
      faultHandling: {
        global: noop,
        // Skip a host that failed three times in a row for a second, so a paused
        // member does not eat every call's deadline.
        host: () =>
          circuitBreaker(handleWhen((err) => etcd3().isRecoverableError(err)), {
            halfOpenAfter: 1000,
            breaker: new ConsecutiveBreaker(3),
          }),
      },
    };
  }

  /** The client of the configured endpoints; made on first use, never after `close`. */
  private get main(): Etcd3 {
    if (this.mainClient === undefined) {
      if (this.closed) throw shuttingDownError();
      this.mainClient = new (etcd3().Etcd3)(this.mainOptions);
    }
    return this.mainClient;
  }

  /** The underlying client for this package's own lock and record helpers. */
  get raw(): Etcd3 {
    return this.main;
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
    return this.retrying(deadline, () =>
      this.hedged(deadline, async (client, at) => {
        await client.kv.range({ key: this.barrierKey, count_only: true }, { deadline: at });
        const res = await client.cluster.memberList({ linearizable: true }, { deadline: at });
        const list = toMemberList(res);
        this.reported = list.members.filter((m) => m.started && !m.isLearner).flatMap((m) => m.clientURLs);
        this.forgetRemoved(list.members);
        this.clientURLById = new Map(list.members.filter((m) => m.clientURLs.length > 0).map((m) => [m.id, m.clientURLs[0]]));
        return list;
      }),
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
      return toMemberList(res);
    } catch (err) {
      throw toAgentError(err);
    }
  }

  /** MemberAdd; answers the new member as etcd reports it (unstarted). */
  async addMember(peerURLs: string[], isLearner: boolean, deadline: Deadline): Promise<Member> {
    // Not retried: a lost answer is recovered by the caller's next read of the member list.
    return this.once(deadline, 'add', async (at) => {
      const res = await this.changeClient().cluster.memberAdd({ peerURLs, isLearner }, { deadline: at });
      return toMember(res.member);
    });
  }

  /** MemberRemove by hex id. */
  async removeMember(id: string, deadline: Deadline): Promise<void> {
    await this.once(deadline, 'remove', (at) => this.changeClient().cluster.memberRemove({ ID: wireId(id) }, { deadline: at }));
  }

  /**
   * MemberPromote by hex id (etcd refuses until the learner is in sync). With etcd authentication
   * it goes to the leader's own endpoint: a follower forwards a promote to the leader without the
   * caller's credentials, the leader refuses it ("auth: user name is empty") and the follower retries
   * until the call's deadline (etcd-io/etcd#20757, not fixed in 3.4).
   */
  async promoteMember(id: string, deadline: Deadline): Promise<void> {
    const client = this.options.username === undefined ? this.changeClient() : await this.leaderClient(deadline);
    await this.once(deadline, 'promote', (at) => client.cluster.memberPromote({ ID: wireId(id) }, { deadline: at }));
  }

  /** MoveLeader, sent to the current leader's own endpoint as etcd requires. */
  async moveLeader(leaderClientURL: string, targetId: string, deadline: Deadline): Promise<void> {
    const client = this.endpointClient(leaderClientURL);
    await this.once(deadline, 'move-leader', (at) =>
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
    this.onStatusCall();
    try {
      const res = await client.maintenance.status({ deadline: new Date(Date.now() + timeoutMs) });
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
      throw toAgentError(err);
    }
  }

  /** Active alarms (NOSPACE, CORRUPT) across the cluster. */
  async alarms(deadline: Deadline): Promise<Alarm[]> {
    return this.retrying(deadline, async (at) => {
      const res = await this.main.maintenance.alarm({ action: 'Get', memberID: 0, alarm: 'None' }, { deadline: at });
      return res.alarms.map((a) => ({ memberId: hexId(a.memberID), alarm: String(a.alarm).toUpperCase() }));
    });
  }

  /** Closes every connection; later calls fail as `unavailable`. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.mainClient?.close();
    for (const client of [...this.perEndpoint.values(), ...this.anonymous.values()]) client.close();
    this.perEndpoint.clear();
    this.anonymous.clear();
  }

  /** A client of the leader's own endpoint, as the endpoint that answered last reports it; else the usual one. */
  private async leaderClient(deadline: Deadline): Promise<Etcd3> {
    const asked = this.preferred ?? this.options.endpoints[0];
    try {
      const status = await this.endpointClient(asked, false).maintenance.status({ deadline: deadline.capped(1000) });
      const url = this.clientURLById.get(hexId(status.leader));
      return url === undefined ? this.changeClient() : this.endpointClient(url);
    } catch {
      // The promote itself will say what is wrong with etcd, through the usual client.
      return this.changeClient();
    }
  }

  /**
   * Closes the connections to client URLs that a member used to report and no member reports now
   * (a removed member), so channels to departed members do not pile up and keep reconnecting.
   */
  private forgetRemoved(members: Member[]): void {
    const now = new Set(members.flatMap((m) => m.clientURLs));
    for (const url of this.everReported) {
      if (now.has(url) || this.options.endpoints.includes(url)) continue;
      this.everReported.delete(url);
      for (const clients of [this.perEndpoint, this.anonymous]) {
        clients.get(url)?.close();
        clients.delete(url);
      }
      if (this.preferred === url) this.preferred = undefined;
    }
    for (const url of now) this.everReported.add(url);
  }

  /**
   * Where membership changes go: the endpoint whose linearizable read just
   * succeeded (a voter that answers), else the pool of configured endpoints.
   */
  private changeClient(): Etcd3 {
    return this.preferred === undefined ? this.main : this.endpointClient(this.preferred);
  }

  /** Endpoints to try, most recently good first: configured ones, then those the members report. */
  private candidates(): string[] {
    const first = this.preferred === undefined ? [] : [this.preferred];
    return [...new Set([...first, ...this.options.endpoints, ...this.reported])];
  }

  /** Runs `fn` on one endpoint after another (hedged every HEDGE_MS, at once after a failure); first answer wins. */
  private hedged<T>(deadline: Deadline, fn: (client: Etcd3, at: Date) => Promise<T>): Promise<T> {
    const urls = this.candidates();
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
          client = this.endpointClient(url);
        } catch (err) {
          finish();
          reject(err);
          return;
        }
        fn(client, deadline.capped(this.attemptTimeoutMs)).then(
          (value) => {
            if (settled) return;
            finish();
            this.preferred = url;
            resolve(value);
          },
          (err: unknown) => {
            pending--;
            errors.push(err);
            if (settled) return;
            if (next < urls.length && !deadline.expired()) return launch();
            if (pending === 0) {
              finish();
              // A refusal that says why (bad credentials) beats "unreachable".
              reject(errors.find((e) => !isTransient(e)) ?? errors[errors.length - 1]);
            }
          },
        );
        if (next < urls.length) timer = setTimeout(launch, HEDGE_MS);
      };
      launch();
    });
  }

  /** A client bound to exactly one endpoint, with no retries and no circuit breaker; TLS always, etcd credentials unless `authenticated` is false. */
  private endpointClient(url: string, authenticated = true): Etcd3 {
    if (this.closed) throw shuttingDownError();
    const clients = authenticated ? this.perEndpoint : this.anonymous;
    let client = clients.get(url);
    if (client === undefined) {
      client = new (etcd3().Etcd3)({ ...this.baseOptions([url], authenticated), faultHandling: { global: noop, host: () => noop } });
      clients.set(url, client);
    }
    return client;
  }

  private baseOptions(hosts: string[], authenticated = true): IOptions {
    const o = this.options;
    const options: IOptions = { hosts, dialTimeout: this.attemptTimeoutMs };
    if (o.caFile !== undefined) {
      options.credentials = {
        rootCertificate: fs.readFileSync(o.caFile),
        ...(o.certFile !== undefined && o.keyFile !== undefined
          ? { certChain: fs.readFileSync(o.certFile), privateKey: fs.readFileSync(o.keyFile) }
          : {}),
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
    return options;
  }

  /** One attempt of a membership RPC, counted whether or not etcd accepted it. */
  private async once<T>(deadline: Deadline, kind: ChangeKind, fn: (at: Date) => Promise<T>): Promise<T> {
    deadline.check(`sending ${kind}`);
    this.onChange(kind);
    try {
      return await fn(deadline.capped(this.attemptTimeoutMs * 2));
    } catch (err) {
      throw toAgentError(err);
    }
  }

  /** A read, retried on transient failure while the deadline allows another attempt. */
  private async retrying<T>(deadline: Deadline, fn: (at: Date) => Promise<T>): Promise<T> {
    try {
      return await pRetry(
        () => fn(deadline.capped(this.attemptTimeoutMs)),
        retryTransient(deadline, { minTimeout: 50, maxTimeout: 400, reserveMs: 100 }),
      );
    } catch (err) {
      throw toAgentError(err);
    }
  }
}
