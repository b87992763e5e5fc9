/**
 * The cluster client: the only place that talks to etcd. Every call carries a deadline and goes to
 * the configured endpoints and the client URLs of the last member list, failing over from one to
 * the next (endpoints.ts); transient failures are retried here inside that deadline (etcd3's own
 * retries and breakers are off so they do not stack). The etcd3 clients themselves are built in
 * endpoint-clients.ts; what a member list teaches about where members are is kept in
 * member-discovery.ts; etcd's answers are turned into the agent's shapes in wire.ts.
 */
import pRetry from 'p-retry';
import type { Etcd3, IStatusResponse, Lease } from 'etcd3';
import { Deadline } from '../lib/deadline';
import { AgentError } from '../proto/errors';
import type { Member, MemberList, MemberStatus } from '../proto/types';
import type { EtcdConnectionOptions } from './connection-options';
import { EndpointClients } from './endpoint-clients';
import { EndpointCall, EndpointSet, isWrongEndpoint } from './endpoints';
import { etcdRefusal, GuardedRpc, permissionRefusal, retryTransient, toAgentError } from './errors';
import { MemberDiscovery } from './member-discovery';
import { fetchMemberMetrics, type MemberMetrics } from './member-metrics';
import type { Unpin } from './retiring-clients';
import { hasLinearizableMemberList, ServerVersions } from './server-version';
import { StatusToken } from './status-token';
import { Alarm, toAlarms, toMember, toMemberList, toMemberStatus, wireId } from './wire';

/** Longest wait for an endpoint's Status when it is asked only for its version (`listMembers`). */
const VERSION_ASK_MS = 1000;

/** A membership RPC kind, as counted by `etcd_agent_membership_changes_total{kind}`. */
export type ChangeKind = 'add' | 'remove' | 'promote' | 'move-leader';

/** Called when each membership RPC sent has its answer: `ok`, or the AgentError code it failed with. */
export type ChangeListener = (kind: ChangeKind, result: string) => void;

/**
 * Called when each Status call has its answer: `ok` with the status (its revision feeds the
 * maintenance run's revision history), or the AgentError code it failed with.
 */
export type StatusListener = (result: string, status?: MemberStatus) => void;

/** A lease granted for the membership lock, and the pin that keeps its client open across a TLS rotation. */
export interface GrantedLease {
  lease: Lease;
  id: string;
  /** Releases the pin on the client the lease lives on (after the lease is revoked or given up). */
  unpin: Unpin;
}

/** A client of one etcd cluster, through its configured endpoints and the client URLs its members report. */
export class EtcdCluster {
  private readonly attemptTimeoutMs: number;
  private readonly barrierKey: Buffer;
  private readonly endpoints: EndpointSet;
  private readonly clients: EndpointClients;
  private readonly discovery: MemberDiscovery;
  /** The etcd version each endpoint reported in its last Status answer (server-version.ts). */
  private readonly versions = new ServerVersions();
  /** Calls in `retrying` now: a stop waits for them (`settled`), so no retry pause outlives it. */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** The auth token of Status calls, when the agent has etcd credentials (status-token.ts). */
  private readonly statusToken?: StatusToken;

  constructor(
    private readonly options: EtcdConnectionOptions,
    private readonly onChange: ChangeListener = () => undefined,
    private readonly onStatusCall: StatusListener = () => undefined,
  ) {
    this.attemptTimeoutMs = options.attemptTimeoutMs ?? 3000;
    this.barrierKey = Buffer.from(`${options.keyPrefix ?? '/etcd-lifecycle-agent/'}barrier`);
    this.endpoints = new EndpointSet(options.endpoints, (url) => this.endpointClient(url));
    this.clients = new EndpointClients(options, this.attemptTimeoutMs);
    this.discovery = new MemberDiscovery(options, this.endpoints, this.clients);
    if (options.username !== undefined && options.passwordFile !== undefined) {
      this.statusToken = new StatusToken(options.username, options.passwordFile, this.endpoints, (url) => this.endpointClient(url, false), this.attemptTimeoutMs);
    }
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
   * The linearizable member list, asked with `linearizable: true`. Where the endpoint's etcd has
   * that field (3.5 and later) that is all; etcd 3.4 does not know it and answers MemberList from
   * the asked member's own applied state, so there, and where the version could not be learnt, a
   * linearizable read on the same member comes first (a KV read below ETCD_AGENT_KEY_PREFIX): once it
   * returns, that member has applied everything committed before it, membership changes included.
   * The version comes from the endpoint's last Status answer. An endpoint never asked yet is asked
   * for its Status beside the barrier read, so the first read costs no more than on 3.4, and a
   * barrier the user may not read does not stop the list where the Status says 3.5+. Asked of one
   * endpoint at a time, a further one joining every 200 ms without an answer, so one frozen member
   * costs 200 ms, not a whole attempt.
   */
  async listMembers(deadline: Deadline): Promise<MemberList> {
    return this.guarded('member-list', () =>
      this.read(deadline, async (client, at, url) => {
        const known = this.versions.of(url);
        if (!hasLinearizableMemberList(known)) {
          const asking = known === undefined ? this.versionOf(url, at) : undefined;
          try {
            await client.kv.range({ key: this.barrierKey, count_only: true }, { deadline: at });
          } catch (err) {
            if (!hasLinearizableMemberList(await asking)) throw permissionRefusal(err, 'barrier', this.options.username);
          }
        }
        const res = await client.cluster.memberList({ linearizable: true }, { deadline: at });
        const list = toMemberList(res);
        this.discovery.learn(list.members);
        return list;
      }),
    );
  }

  /**
   * The member list as the first member to answer holds it, without going through a quorum (etcd
   * 3.5+ `linearizable: false`; 3.4 always answers so). Only to know whom to ask when a quorum may be
   * lost (membership/quorum-gate.ts): never to decide a change, and not learned from either.
   */
  localMemberList(deadline: Deadline): Promise<MemberList> {
    return this.read(deadline, async (client, at) => toMemberList(await client.cluster.memberList({ linearizable: false }, { deadline: at })));
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
        const unpin = this.clients.pin(client);
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
   * The member list as the member at `clientURL` has applied it, asked there alone within `timeoutMs`
   * (no retries), without a quorum: not linearizable. For when the configured endpoints cannot answer
   * (down, a learner, which refuses MemberList, or no quorum): a voter's own view still tells whom to
   * ask for their status. etcd 3.4 answers every MemberList so; 3.5+ only one asked with
   * `linearizable: false`, and with `true` waits for a quorum that may be gone.
   */
  async memberListAt(clientURL: string, timeoutMs: number): Promise<MemberList> {
    const client = this.endpointClient(clientURL);
    try {
      const res = await client.cluster.memberList({ linearizable: false }, { deadline: new Date(Date.now() + timeoutMs) });
      const list = toMemberList(res);
      this.discovery.learn(list.members);
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
   * until the call's deadline (etcd-io/etcd#20757; fixed in 3.5.28 and 3.6.6, never in 3.4).
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
   * Its client authenticates nowhere: a learner refuses Authenticate ("rpc not supported for
   * learner"), and an Authenticate to a frozen member would hold the call for a whole attempt
   * instead of `timeoutMs`. With etcd credentials it carries a token asked of another endpoint
   * (status-token.ts): etcd 3.4.42+, 3.5.28+ and 3.6 refuse Status without one when auth is on. The
   * version in the answer is remembered for the endpoint (`listMembers` reads it).
   */
  async memberStatus(clientURL: string, timeoutMs: number): Promise<MemberStatus> {
    const until = Date.now() + timeoutMs;
    let latencyMs = 0;
    const ask = async (): Promise<IStatusResponse> => {
      const credentials = await this.statusToken?.credentials(Math.max(1, until - Date.now()));
      const started = performance.now();
      const res = await this.endpointClient(clientURL, false).maintenance.status({
        deadline: new Date(until),
        ...(credentials === undefined ? {} : { credentials }),
      });
      latencyMs = Math.round((performance.now() - started) * 100) / 100;
      return res;
    };
    try {
      let res: IStatusResponse;
      try {
        res = await ask();
      } catch (err) {
        // A token this member no longer knows (its TTL passed there), or none while auth is on: once more with a new one.
        const refusal = etcdRefusal(err);
        if (this.statusToken === undefined || (refusal !== 'invalid-token' && refusal !== 'user-required') || Date.now() >= until) throw err;
        this.statusToken.renew();
        res = await ask();
      }
      this.versions.learn(clientURL, res.version);
      const status = toMemberStatus(res, latencyMs);
      this.onStatusCall('ok', status);
      return status;
    } catch (err) {
      const error = permissionRefusal(err, 'status', this.options.username);
      this.onStatusCall(error.code);
      throw error;
    }
  }

  /** The etcd version `clientURL` reported in its last Status answer, if it answered one. */
  serverVersion(clientURL: string): string | undefined {
    return this.versions.of(clientURL);
  }

  /**
   * The version `url` runs, asked now (a Status call, within half of what is left before `at` and at
   * most 1 s); undefined when it does not say. The answer is remembered for the next read (Status
   * answers are); an endpoint that did not answer is not asked again for 10 s.
   */
  private async versionOf(url: string, at: Date): Promise<string | undefined> {
    if (!this.versions.worthAsking(url)) return undefined;
    try {
      return (await this.memberStatus(url, Math.max(1, Math.min(VERSION_ASK_MS, (at.getTime() - Date.now()) / 2)))).version;
    } catch {
      // The read itself will say what is wrong with this endpoint.
      this.versions.askFailed(url);
      return undefined;
    }
  }

  /** Active alarms (NOSPACE, CORRUPT) across the cluster. */
  async alarms(deadline: Deadline): Promise<Alarm[]> {
    return this.guarded('alarm', () =>
      this.read(deadline, async (client, at) => {
        const res = await client.maintenance.alarm({ action: 'Get', memberID: 0, alarm: 'None' }, { deadline: at });
        return toAlarms(res);
      }),
    );
  }

  /**
   * Maintenance.Defragment of one member, at its own client URL as etcd requires (it defragments
   * the member it is sent to), within `timeoutMs`: long enough for a big database, since etcd goes on
   * defragmenting whatever the client does. Never retried here: after a failure the caller looks at
   * the member (`memberMetrics`) before anything else.
   */
  async defragment(clientURL: string, timeoutMs: number): Promise<void> {
    try {
      await this.endpointClient(clientURL).maintenance.defragment({ deadline: new Date(Date.now() + timeoutMs) });
    } catch (err) {
      throw toAgentError(err);
    }
  }

  /**
   * The member's own `/metrics` gauges (member-metrics.ts): whether it is defragmenting now, and
   * its backend quota. Within `timeoutMs`, no retries.
   */
  async memberMetrics(clientURL: string, timeoutMs: number): Promise<MemberMetrics> {
    try {
      return await fetchMemberMetrics(clientURL, timeoutMs, { caFile: this.options.caFile, certFile: this.options.certFile, keyFile: this.options.keyFile });
    } catch (err) {
      throw new AgentError('unavailable', `the metrics page of ${clientURL} could not be read: ${err instanceof Error ? err.message : String(err)}`, {
        cause: err,
      });
    }
  }

  /**
   * The key-value store's current revision, from the header of a linearizable range (a count of
   * the barrier key): what a compaction's target is counted back from.
   */
  async currentRevision(deadline: Deadline): Promise<number> {
    return this.read(deadline, async (client, at) => {
      const res = await client.kv.range({ key: this.barrierKey, count_only: true }, { deadline: at });
      return Number(res.header.revision);
    });
  }

  /**
   * Compacts the key-value history up to `revision`, `physical` (the answer waits until the member
   * asked has removed it). Safe to repeat: etcd answers a repeat "required revision has been
   * compacted" (`etcdRefusal` 'compacted'), which the caller reads as done.
   */
  async compact(revision: number, deadline: Deadline, attemptMs = 60_000): Promise<void> {
    await this.write(deadline, (client, at) => client.kv.compact({ revision, physical: true }, { deadline: at }), attemptMs);
  }

  /**
   * Disarms the NOSPACE alarm of member `memberId` (hex), and nothing else: no other alarm type is
   * ever sent. Repeatable (disarming an alarm that is gone changes nothing).
   */
  async disarmNoSpace(memberId: string, deadline: Deadline): Promise<void> {
    await this.write(deadline, (client, at) =>
      client.maintenance.alarm({ action: 'Deactivate', memberID: wireId(memberId), alarm: 'Nospace' }, { deadline: at }),
    );
  }

  /** Closes every connection; later calls fail as `unavailable`. */
  close(): void {
    this.clients.close();
  }

  /**
   * Settles once every call in flight now has ended. After `close` that is within one retry pause
   * (400 ms at most): the next attempt fails as shutting down, which is never retried.
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

  /** The leader's own client URL, as the best endpoint reports it; else the best endpoint. */
  private async leaderURL(deadline: Deadline): Promise<string> {
    const asked = this.endpoints.best();
    try {
      const status = await this.memberStatus(asked, Math.min(1000, deadline.remainingMs()));
      return this.discovery.clientURLOf(status.leaderId) ?? asked;
    } catch {
      // The promote itself will say what is wrong with etcd.
      return asked;
    }
  }

  /** The client of exactly one endpoint (built once, kept); etcd credentials unless `authenticated` is false. */
  private endpointClient(url: string, authenticated = true): Etcd3 {
    return this.clients.get(url, authenticated);
  }

  /** One attempt of a membership RPC at `url`, counted whether or not etcd accepted it. */
  private async once<T>(deadline: Deadline, kind: ChangeKind, url: string, fn: EndpointCall<T>): Promise<T> {
    deadline.check(`sending ${kind}`);
    try {
      const value = await fn(this.endpointClient(url), deadline.capped(this.attemptTimeoutMs * 2), url);
      this.endpoints.succeeded(url);
      this.onChange(kind, 'ok');
      return value;
    } catch (err) {
      // The caller reads the member list again before any retry, and that read skips `url` now.
      this.endpoints.failed(url, err);
      const error = permissionRefusal(err, kind, this.options.username);
      this.onChange(kind, error.code);
      throw error;
    }
  }

  /** `call`, its failure said as a permission refusal of `rpc` when etcd denied it to the agent's user. */
  private async guarded<T>(rpc: GuardedRpc, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw permissionRefusal(err, rpc, this.options.username);
    }
  }

  /** A call, retried on transient failure while the deadline allows another attempt. */
  private async retrying<T>(deadline: Deadline, fn: () => Promise<T>): Promise<T> {
    const call = pRetry(fn, retryTransient(deadline, { minTimeout: 50, maxTimeout: 400, reserveMs: 100 }));
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
