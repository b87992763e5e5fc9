/**
 * Watching a learner catch up, from the bench, through etcd's JSON gateway
 * (POST /v3/maintenance/status): plain HTTP, so a member that is not listening
 * yet costs one refused connection per poll, not a gRPC reconnect back-off that
 * would make "in sync" look later than it was.
 */
import { HttpClient } from './http';
import { sleep } from './stats';

/** The fields of a Status answer the bench reads. */
export interface GatewayStatus {
  memberId: string;
  leader: string;
  raftIndex: number;
  raftAppliedIndex: number;
  isLearner: boolean;
}

/** Status of the member at `client` (its client URL), or undefined when it does not answer. */
export async function gatewayStatus(client: HttpClient): Promise<GatewayStatus | undefined> {
  try {
    const answer = await client.post('/v3/maintenance/status', {}, 1000);
    if (answer.status !== 200) return undefined;
    const b = answer.body as {
      header?: { member_id?: string };
      leader?: string;
      raftIndex?: string;
      raftAppliedIndex?: string;
      isLearner?: boolean;
    };
    return {
      memberId: BigInt(b.header?.member_id ?? '0').toString(16),
      leader: BigInt(b.leader ?? '0').toString(16),
      raftIndex: Number(b.raftIndex ?? 0),
      raftAppliedIndex: Number(b.raftAppliedIndex ?? 0),
      isLearner: b.isLearner === true,
    };
  } catch {
    return undefined;
  }
}

/**
 * Polls a learner and the leader every `everyMs` and notes when the learner first looked in sync
 * (its raft index within 10% of the leader's: etcd's promotion rule, learnerReadyPercent 0.9) and
 * when it had caught up completely.
 */
export class SyncWatch {
  /** performance.now() of the first poll that found the learner in sync. */
  inSyncAt?: number;
  /** performance.now() of the first poll that found it fully caught up. */
  caughtUpAt?: number;
  private stopped = false;
  private readonly learner: HttpClient;
  private readonly leader: HttpClient;
  private readonly loop: Promise<void>;

  constructor(learnerURL: string, leaderURL: string, everyMs = 10) {
    this.learner = new HttpClient(learnerURL);
    this.leader = new HttpClient(leaderURL);
    this.loop = this.run(everyMs);
  }

  /** Resolves once the learner has fully caught up (or rejects after `timeoutMs`). */
  async caughtUp(timeoutMs = 20_000): Promise<number> {
    const until = performance.now() + timeoutMs;
    while (this.caughtUpAt === undefined) {
      if (performance.now() > until) throw new Error('the learner did not catch up');
      await sleep(5);
    }
    return this.caughtUpAt;
  }

  /** Stops polling. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
    this.learner.close();
    this.leader.close();
  }

  private async run(everyMs: number): Promise<void> {
    while (!this.stopped && this.caughtUpAt === undefined) {
      const polled = performance.now();
      const [own, lead] = await Promise.all([gatewayStatus(this.learner), gatewayStatus(this.leader)]);
      if (own !== undefined && lead !== undefined && lead.raftIndex > 0) {
        // The answer is evidence of the moment the poll was sent at the latest.
        if (this.inSyncAt === undefined && own.raftIndex >= lead.raftIndex * 0.9) this.inSyncAt = polled;
        if (own.raftAppliedIndex >= lead.raftIndex) this.caughtUpAt = polled;
      }
      await sleep(Math.max(0, everyMs - (performance.now() - polled)));
    }
  }
}
