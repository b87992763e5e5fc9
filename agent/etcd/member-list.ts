/**
 * Reading etcd's member list: linearizable for what a decision is made from, or a member's own
 * copy, without a quorum, for finding whom to ask when a quorum may be lost.
 *
 * Invariant: `linearizable` answers a list that holds every membership change committed before the
 * read, on every etcd version; the other two only say whom to ask, never whether to make a change.
 */
import type { Deadline } from '../lib/deadline';
import type { MemberList } from '../proto/types';
import type { EndpointCalls } from './endpoint-calls';
import { toAgentError } from './errors';
import type { MemberStatusCalls } from './member-status';
import { permissionRefusal } from './permission-refusal';
import { hasLinearizableMemberList } from './server-version';
import { toMemberList } from './wire';

/** The member list reads of one cluster client. */
export class MemberListReads {
  constructor(
    private readonly calls: EndpointCalls,
    private readonly status: MemberStatusCalls,
    /** The key below ETCD_AGENT_KEY_PREFIX whose linearizable read is the barrier on etcd 3.4. */
    private readonly barrierKey: Buffer,
    /** The agent's etcd user, for permission refusals. */
    private readonly username: string | undefined,
  ) {}

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
   * costs 200 ms, not a whole attempt. The list's members become endpoints (member-discovery.ts).
   */
  async linearizable(deadline: Deadline): Promise<MemberList> {
    try {
      return await this.calls.read(deadline, async (client, at, url) => {
        const known = this.status.knownVersion(url);
        if (!hasLinearizableMemberList(known)) {
          const asking = known === undefined ? this.status.askVersion(url, at) : undefined;
          try {
            await client.kv.range({ key: this.barrierKey, count_only: true }, { deadline: at });
          } catch (err) {
            if (!hasLinearizableMemberList(await asking)) throw permissionRefusal(err, 'barrier', this.username);
          }
        }
        const res = await client.cluster.memberList({ linearizable: true }, { deadline: at });
        const list = toMemberList(res);
        this.calls.discovery.learn(list.members);
        return list;
      });
    } catch (err) {
      throw permissionRefusal(err, 'member-list', this.username);
    }
  }

  /**
   * The member list as the first member to answer holds it, without going through a quorum (etcd
   * 3.5+ `linearizable: false`; 3.4 always answers so). Only to know whom to ask when a quorum may be
   * lost (membership/quorum-gate.ts): never to decide a change, and not learned from either.
   */
  local(deadline: Deadline): Promise<MemberList> {
    return this.calls.read(deadline, async (client, at) =>
      toMemberList(await client.cluster.memberList({ linearizable: false }, { deadline: at })),
    );
  }

  /**
   * The member list as the member at `clientURL` has applied it, asked there alone within `timeoutMs`
   * (no retries), without a quorum: not linearizable. For when the configured endpoints cannot answer
   * (down, a learner, which refuses MemberList, or no quorum): a voter's own view still tells whom to
   * ask for their status. etcd 3.4 answers every MemberList so; 3.5+ only one asked with
   * `linearizable: false`, and with `true` waits for a quorum that may be gone.
   */
  async at(clientURL: string, timeoutMs: number): Promise<MemberList> {
    const client = this.calls.client(clientURL);
    try {
      const res = await client.cluster.memberList({ linearizable: false }, { deadline: new Date(Date.now() + timeoutMs) });
      const list = toMemberList(res);
      this.calls.discovery.learn(list.members);
      return list;
    } catch (err) {
      throw toAgentError(err);
    }
  }
}
