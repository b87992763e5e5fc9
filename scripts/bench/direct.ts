/**
 * The agent's RPC sequences, sent straight from Node with etcd3 and nothing
 * else: the floor a membership call through the agent cannot go below. The
 * difference of medians (agent over HTTP − this) is the agent's own overhead.
 *
 * Each mirrors agent/membership/*.ts step for step: the barrier read + MemberList
 * (cluster-client.ts listMembers), the lock (lease grant + one txn, lock.ts),
 * the member list read again under the lock, a Status to every member, the
 * operation record's step put, the one membership RPC, the lease revoke.
 * Membership RPCs and reads go to the first endpoint, as the agent's preferred
 * endpoint; lock calls go through a pool of all endpoints, as the agent's.
 */
import { randomUUID } from 'node:crypto';
import { noop } from 'cockatiel';
import { Etcd3, IMember, IOptions } from 'etcd3';

const PREFIX = '/bench-direct/';
/** As the agent's clients: etcd3's own retries and breakers off (etcd/endpoint-clients.ts). */
const PLAIN: IOptions['faultHandling'] = { global: noop, host: () => noop };

/** Replays the agent's sequences against a cluster. */
export class DirectClient {
  private readonly pool: Etcd3;
  private readonly first: Etcd3;
  private readonly perEndpoint = new Map<string, Etcd3>();
  private readonly barrier = Buffer.from(`${PREFIX}barrier`);

  constructor(endpoints: string[]) {
    this.pool = new Etcd3({ hosts: endpoints, faultHandling: PLAIN });
    this.first = new Etcd3({ hosts: [endpoints[0]], faultHandling: PLAIN });
  }

  /** Runs `fn`, naming `step` in any error (the bench then says which RPC failed). */
  private static async step<T>(step: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw new Error(`direct ${step}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  /** Barrier read, then MemberList, on the first endpoint. */
  async read(): Promise<IMember[]> {
    await this.first.kv.range({ key: this.barrier, count_only: true });
    return (await this.first.cluster.memberList({ linearizable: true })).members;
  }

  /** A Status of every started member, at its own client URL, in parallel. */
  async probe(members: IMember[]): Promise<void> {
    await Promise.all(
      members
        .filter((m) => (m.clientURLs ?? []).length > 0)
        .map((m) =>
          this.endpoint(m.clientURLs[0])
            .maintenance.status()
            .catch(() => undefined),
        ),
    );
  }

  /** MemberAdd of a learner, as a join that finds no member sends it. Resolves its hex id. */
  async addLearner(peerURL: string): Promise<string> {
    const list = await this.read();
    if (list.some((m) => m.peerURLs.includes(peerURL))) throw new Error(`${peerURL} is already a member`);
    return this.underLock(async (lease, key) => {
      const again = await this.read();
      await this.probe(again);
      await this.step(lease, key);
      const res = await DirectClient.step('MemberAdd', () => this.first.cluster.memberAdd({ peerURLs: [peerURL], isLearner: true }));
      return BigInt(res.member.ID).toString(16);
    });
  }

  /** MemberPromote, as POST /v1/members/promote of an in-sync learner sends it. */
  async promote(hexId: string): Promise<void> {
    const list = await this.read();
    await this.probe(list);
    await this.underLock(async (lease, key) => {
      const again = await this.read();
      await this.probe(again);
      await this.step(lease, key);
      await DirectClient.step('MemberPromote', () => this.first.cluster.memberPromote({ ID: BigInt(`0x${hexId}`).toString(10) }));
    });
  }

  /** MemberRemove, as a leave sends it; a started voter is probed first (quorum check). */
  async remove(hexId: string): Promise<void> {
    const wire = BigInt(`0x${hexId}`).toString(10);
    const list = await this.read();
    if (!list.some((m) => m.ID === wire)) throw new Error(`no member ${hexId}`);
    await this.underLock(async (lease, key) => {
      const again = await this.read();
      const member = again.find((m) => m.ID === wire);
      if (member !== undefined && member.name !== '' && member.isLearner !== true) await this.probe(again);
      await this.step(lease, key);
      await DirectClient.step('MemberRemove', () => this.first.cluster.memberRemove({ ID: wire }));
    });
  }

  /** Closes every connection. */
  close(): void {
    this.pool.close();
    this.first.close();
    for (const c of this.perEndpoint.values()) c.close();
  }

  private async underLock<T>(fn: (lease: string, recordKey: Buffer) => Promise<T>): Promise<T> {
    const id = randomUUID();
    const record = Buffer.from(JSON.stringify({ id, action: 'bench', step: 'locked', startedAt: new Date().toISOString() }));
    const lockKey = Buffer.from(`${PREFIX}lock`);
    const recordKey = Buffer.from(`${PREFIX}operations/${id}`);
    const { ID: lease } = await this.pool.leaseClient.leaseGrant({ TTL: 10 });
    const txn = await this.pool.kv.txn({
      compare: [{ key: lockKey, target: 'Create', result: 'Equal', create_revision: 0 }],
      success: [
        { request_put: { key: lockKey, value: Buffer.from(JSON.stringify({ operationId: id })), lease } },
        { request_put: { key: recordKey, value: record, lease } },
      ],
      failure: [{ request_range: { key: lockKey } }],
    });
    if (!txn.succeeded) throw new Error('direct: the bench lock is taken');
    try {
      return await fn(lease, recordKey);
    } finally {
      await this.pool.leaseClient.leaseRevoke({ ID: lease });
    }
  }

  private async step(lease: string, key: Buffer): Promise<void> {
    await this.pool.kv.put({ key, value: Buffer.from(JSON.stringify({ step: 'sending' })), lease });
  }

  private endpoint(url: string): Etcd3 {
    let client = this.perEndpoint.get(url);
    if (client === undefined) {
      client = new Etcd3({ hosts: [url], faultHandling: PLAIN });
      this.perEndpoint.set(url, client);
    }
    return client;
  }
}
