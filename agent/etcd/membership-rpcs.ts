/**
 * The membership RPCs as etcd takes them: MemberAdd, MemberRemove, MemberPromote and MoveLeader,
 * each sent once to one endpoint and counted whether or not etcd accepted it.
 *
 * Invariant: a membership RPC is never retried here. A lost answer is recovered by the caller's
 * next read of the member list, which decides whether the change still needs making (and skips the
 * endpoint that failed, marked so here).
 */
import type { Etcd3 } from 'etcd3';
import type { Deadline } from '../lib/deadline';
import type { Member, MemberStatus } from '../proto/types';
import type { EndpointCall, EndpointSet } from './endpoints';
import { permissionRefusal } from './permission-refusal';
import { toMember, wireId } from './wire';

/** Longest wait for the Status call that finds the leader's endpoint before a promote. */
const LEADER_ASK_MS = 1000;

/** A membership RPC kind, as counted by `etcd_agent_membership_changes_total{kind}`. */
export type ChangeKind = 'add' | 'remove' | 'promote' | 'move-leader';

/** Called when each membership RPC sent has its answer: `ok`, or the AgentError code it failed with. */
export type ChangeListener = (kind: ChangeKind, result: string) => void;

/** What the membership RPCs need of the cluster client. */
export interface MembershipRpcDeps {
  endpoints: EndpointSet;
  /** The client of exactly one endpoint, with the agent's etcd credentials. */
  clientOf: (url: string) => Etcd3;
  attemptTimeoutMs: number;
  /** The agent's etcd user, for permission refusals and for where a promote goes. */
  username?: string;
  onChange: ChangeListener;
  memberStatus: (clientURL: string, timeoutMs: number) => Promise<MemberStatus>;
  /** The client URL of a started member by hex id, from the last member list. */
  clientURLOf: (id: string) => string | undefined;
}

/** Sends membership RPCs, one attempt each; see the module comment. */
export class MembershipRpcs {
  constructor(private readonly deps: MembershipRpcDeps) {}

  /** MemberAdd; answers the new member as etcd reports it (unstarted). */
  async add(peerURLs: string[], isLearner: boolean, deadline: Deadline): Promise<Member> {
    return this.once(deadline, 'add', this.deps.endpoints.best(), async (client, at) => {
      const res = await client.cluster.memberAdd({ peerURLs, isLearner }, { deadline: at });
      return toMember(res.member);
    });
  }

  /** MemberRemove by hex id. */
  async remove(id: string, deadline: Deadline): Promise<void> {
    await this.once(deadline, 'remove', this.deps.endpoints.best(), (client, at) =>
      client.cluster.memberRemove({ ID: wireId(id) }, { deadline: at }),
    );
  }

  /**
   * MemberPromote by hex id (etcd refuses until the learner is in sync). With etcd authentication
   * it goes to the leader's own endpoint: a follower forwards a promote to the leader without the
   * caller's credentials, the leader refuses it ("auth: user name is empty") and the follower retries
   * until the call's deadline (etcd-io/etcd#20757; fixed in 3.5.28 and 3.6.6, never in 3.4).
   */
  async promote(id: string, deadline: Deadline): Promise<void> {
    const url = this.deps.username === undefined ? this.deps.endpoints.best() : await this.leaderURL(deadline);
    await this.once(deadline, 'promote', url, (client, at) => client.cluster.memberPromote({ ID: wireId(id) }, { deadline: at }));
  }

  /** MoveLeader, sent to the current leader's own endpoint as etcd requires. */
  async moveLeader(leaderClientURL: string, targetId: string, deadline: Deadline): Promise<void> {
    await this.once(deadline, 'move-leader', leaderClientURL, (client, at) =>
      client.maintenance.moveLeader({ targetID: wireId(targetId) }, { deadline: at }),
    );
  }

  /** The leader's own client URL, as the best endpoint reports it; else the best endpoint. */
  private async leaderURL(deadline: Deadline): Promise<string> {
    const asked = this.deps.endpoints.best();
    try {
      const status = await this.deps.memberStatus(asked, Math.min(LEADER_ASK_MS, deadline.remainingMs()));
      return this.deps.clientURLOf(status.leaderId) ?? asked;
    } catch {
      // The promote itself will say what is wrong with etcd.
      return asked;
    }
  }

  /** One attempt of a membership RPC at `url`, counted whether or not etcd accepted it. */
  private async once<T>(deadline: Deadline, kind: ChangeKind, url: string, fn: EndpointCall<T>): Promise<T> {
    const { endpoints, onChange } = this.deps;
    deadline.check(`sending ${kind}`);
    try {
      const value = await fn(this.deps.clientOf(url), deadline.capped(this.deps.attemptTimeoutMs * 2), url);
      endpoints.succeeded(url);
      onChange(kind, 'ok');
      return value;
    } catch (err) {
      // The caller reads the member list again before any retry, and that read skips `url` now.
      endpoints.failed(url, err);
      const error = permissionRefusal(err, kind, this.deps.username);
      onChange(kind, error.code);
      throw error;
    }
  }
}
