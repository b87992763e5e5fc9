/**
 * The cluster client: the only place that talks to etcd, and the one vocabulary the rest of the
 * agent calls it by. Every call carries a deadline and goes to the configured endpoints and the
 * client URLs of the last member list, failing over from one to the next; transient failures are
 * retried inside that deadline, nowhere else (endpoint-calls.ts). The etcd3 clients themselves are
 * built in endpoint-clients.ts; what a member list teaches about where members are is kept in
 * member-discovery.ts; the member list reads are in member-list.ts; Status calls and the versions
 * they report in member-status.ts; the membership RPCs, never retried, in membership-rpcs.ts;
 * etcd's answers are turned into the agent's shapes in wire.ts.
 */
import type { Etcd3, Lease } from 'etcd3';
import type { Deadline } from '../lib/deadline';
import { AgentError } from '../proto/errors';
import type { Member, MemberList, MemberStatus } from '../proto/types';
import type { EtcdConnectionOptions } from './connection-options';
import { EndpointCalls } from './endpoint-calls';
import type { EndpointCall } from './endpoints';
import { toAgentError } from './errors';
import { MemberListReads } from './member-list';
import { fetchMemberMetrics, type MemberMetrics } from './member-metrics';
import { MemberStatusCalls, type StatusListener } from './member-status';
import { MembershipRpcs, type ChangeListener } from './membership-rpcs';
import { GuardedRpc, permissionRefusal } from './permission-refusal';
import type { Unpin } from './retiring-clients';
import { openSnapshot, type SnapshotStream } from './snapshot-stream';
import { Alarm, toAlarms, wireId } from './wire';

export type { ChangeKind, ChangeListener } from './membership-rpcs';

/** The longest single attempt of a cluster-wide call when the options name none. */
const DEFAULT_ATTEMPT_MS = 3000;
/** The longest single attempt of a compaction: etcd answers a physical one once the member asked has removed the history. */
const COMPACT_ATTEMPT_MS = 60_000;

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
  private readonly calls: EndpointCalls;
  private readonly status: MemberStatusCalls;
  private readonly membership: MembershipRpcs;
  private readonly lists: MemberListReads;

  constructor(
    private readonly options: EtcdConnectionOptions,
    onChange: ChangeListener = () => undefined,
    onStatusCall: StatusListener = () => undefined,
  ) {
    this.attemptTimeoutMs = options.attemptTimeoutMs ?? DEFAULT_ATTEMPT_MS;
    this.barrierKey = Buffer.from(`${options.keyPrefix ?? '/etcd-lifecycle-agent/'}barrier`);
    this.calls = new EndpointCalls(options, this.attemptTimeoutMs);
    this.status = new MemberStatusCalls(
      options,
      this.calls.endpoints,
      (url) => this.calls.client(url, false),
      this.attemptTimeoutMs,
      onStatusCall,
    );
    this.membership = new MembershipRpcs({
      endpoints: this.calls.endpoints,
      clientOf: (url) => this.calls.client(url),
      attemptTimeoutMs: this.attemptTimeoutMs,
      username: options.username,
      onChange,
      memberStatus: (url, ms) => this.memberStatus(url, ms),
      clientURLOf: (id) => this.calls.discovery.clientURLOf(id),
    });
    this.lists = new MemberListReads(this.calls, this.status, this.barrierKey, options.username);
  }

  /** A client of the endpoint a call would go to now (for tests and tools; the agent's own calls fail over). */
  get raw(): Etcd3 {
    return this.calls.client(this.calls.endpoints.best());
  }

  /**
   * Reads the member list at a peer listener (this pod's member's first) and takes its started
   * members' client URLs as endpoints: for when the known endpoints accept calls and never answer,
   * as a joining member's etcd does until it has published itself. True when that added any.
   */
  discoverMembers(deadline: Deadline): Promise<boolean> {
    return this.calls.discovery.discover(deadline);
  }

  /** Endpoints in the order the next call tries them (configured and reported, the last good one first). */
  endpointOrder(): string[] {
    return this.calls.endpoints.ordered();
  }

  /**
   * The linearizable member list, on every etcd version: on 3.4, and where the version is not known,
   * after a linearizable read on the same member (member-list.ts). What membership decisions read.
   */
  listMembers(deadline: Deadline): Promise<MemberList> {
    return this.lists.linearizable(deadline);
  }

  /**
   * The member list as the first member to answer holds it, without going through a quorum. Only to
   * know whom to ask when a quorum may be lost: never to decide a change.
   */
  localMemberList(deadline: Deadline): Promise<MemberList> {
    return this.lists.local(deadline);
  }

  /** A read (idempotent), hedged over the endpoints and retried on transient failure inside `deadline`. */
  read<T>(deadline: Deadline, fn: EndpointCall<T>, attemptMs = this.attemptTimeoutMs): Promise<T> {
    return this.calls.read(deadline, fn, attemptMs);
  }

  /**
   * A write that is safe to repeat (a put, a create-if-absent transaction, a lease call), sent to one
   * endpoint at a time, failing over to the next, and retried on transient failure inside `deadline`.
   */
  write<T>(deadline: Deadline, fn: EndpointCall<T>, attemptMs = this.attemptTimeoutMs): Promise<T> {
    return this.calls.write(deadline, fn, attemptMs);
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
        const unpin = this.calls.clients.pin(client);
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

  /** The member list as the member at `clientURL` has applied it, asked there alone within `timeoutMs`, without a quorum. */
  memberListAt(clientURL: string, timeoutMs: number): Promise<MemberList> {
    return this.lists.at(clientURL, timeoutMs);
  }

  /** MemberAdd; answers the new member as etcd reports it (unstarted). Sent once (membership-rpcs.ts). */
  addMember(peerURLs: string[], isLearner: boolean, deadline: Deadline): Promise<Member> {
    return this.membership.add(peerURLs, isLearner, deadline);
  }

  /** MemberRemove by hex id. Sent once (membership-rpcs.ts). */
  removeMember(id: string, deadline: Deadline): Promise<void> {
    return this.membership.remove(id, deadline);
  }

  /** MemberPromote by hex id; with etcd authentication at the leader's own endpoint (membership-rpcs.ts). */
  promoteMember(id: string, deadline: Deadline): Promise<void> {
    return this.membership.promote(id, deadline);
  }

  /** MoveLeader, sent to the current leader's own endpoint as etcd requires. */
  moveLeader(leaderClientURL: string, targetId: string, deadline: Deadline): Promise<void> {
    return this.membership.moveLeader(leaderClientURL, targetId, deadline);
  }

  /**
   * Maintenance.Status of one member, asked at that member's own client URL, within `timeoutMs`, on
   * a client that authenticates nowhere (member-status.ts). The version in the answer is remembered
   * for the endpoint (`listMembers` reads it).
   */
  memberStatus(clientURL: string, timeoutMs: number): Promise<MemberStatus> {
    return this.status.ask(clientURL, timeoutMs);
  }

  /** The etcd version `clientURL` reported in its last Status answer, if it answered one. */
  serverVersion(clientURL: string): string | undefined {
    return this.status.knownVersion(clientURL);
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
      await this.calls.client(clientURL).maintenance.defragment({ deadline: new Date(Date.now() + timeoutMs) });
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
      return await fetchMemberMetrics(clientURL, timeoutMs, {
        caFile: this.options.caFile,
        certFile: this.options.certFile,
        keyFile: this.options.keyFile,
      });
    } catch (err) {
      throw new AgentError(
        'unavailable',
        `the metrics page of ${clientURL} could not be read: ${err instanceof Error ? err.message : String(err)}`,
        {
          cause: err,
        },
      );
    }
  }

  /** The Snapshot RPC of the member at `clientURL`, as a byte stream (snapshot-stream.ts); `signal` cancels it. */
  snapshot(clientURL: string, signal: AbortSignal): Promise<SnapshotStream> {
    return openSnapshot(this.calls.client(clientURL), signal).catch((err: unknown) => {
      throw toAgentError(err);
    });
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
  async compact(revision: number, deadline: Deadline, attemptMs = COMPACT_ATTEMPT_MS): Promise<void> {
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
    this.calls.close();
  }

  /**
   * Settles once every call in flight now has ended. After `close` that is within one retry pause
   * (400 ms at most): the next attempt fails as shutting down, which is never retried.
   */
  settled(): Promise<void> {
    return this.calls.settled();
  }

  /** `call`, its failure said as a permission refusal of `rpc` when etcd denied it to the agent's user. */
  private async guarded<T>(rpc: GuardedRpc, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw permissionRefusal(err, rpc, this.options.username);
    }
  }
}
