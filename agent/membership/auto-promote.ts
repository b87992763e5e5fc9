/**
 * The agent of a learner's own pod promotes its member by itself as soon as
 * etcd accepts (CONTRACT §4 join), so a learner that nobody calls again still
 * becomes a voter. Cheap when there is nothing to do: one Status of the local
 * etcd per interval. It logs and counts what it does and never throws.
 */
import type { Config } from '../config/config';
import { settledWithin } from '../lib/deadline';
import type { EtcdCluster } from '../etcd/cluster-client';
import type { Logger } from '../observability/logger';
import { isAgentError } from '../proto/errors';
import type { ActionResult } from '../proto/types';

/** What the loop needs: the local Status, and the promote action (counted and locked as any call). */
export interface AutoPromoterDeps {
  cluster: EtcdCluster;
  config: Pick<Config, 'localEndpoint' | 'statusTimeoutMs'>;
  logger: Logger;
  promote: (memberId: string) => Promise<ActionResult>;
  intervalMs?: number;
}

/** Interval while the local member is a learner: promotion should follow sync within a second. */
const LEARNER_INTERVAL_MS = 250;
/**
 * The first look, soon after start but not in it: it loads etcd3 and gRPC (etcd3-module.ts), which
 * would otherwise hold up the agent's first `/readyz`; a learner already in sync waits that much longer.
 */
const FIRST_LOOK_MS = 250;

/** A background loop; `start` once, `stop` on shutdown. */
export class AutoPromoter {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;
  private lastProblem?: string;
  /** The last look found the local member a learner: look again soon, it may be in sync any moment. */
  private learnerSeen = false;

  constructor(private readonly deps: AutoPromoterDeps) {}

  /** Starts the loop; the first look is soon (a sidecar starts beside a learner that may already be in sync). */
  start(): void {
    this.schedule(FIRST_LOOK_MS);
  }

  /** Stops the loop; waits (briefly) for a pass in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.running !== undefined) {
      await settledWithin(this.running, 1000);
    }
  }

  private schedule(delayMs = this.learnerSeen ? LEARNER_INTERVAL_MS : (this.deps.intervalMs ?? 1000)): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick().finally(() => {
        this.running = undefined;
        this.schedule();
      });
    }, delayMs);
    this.timer.unref();
  }

  /** One look: is the local member a learner? Then try to promote it. */
  async tick(): Promise<void> {
    const { cluster, config, logger } = this.deps;
    let memberId: string;
    try {
      const status = await cluster.memberStatus(config.localEndpoint, config.statusTimeoutMs);
      this.learnerSeen = status.isLearner;
      if (!status.isLearner) return;
      memberId = status.memberId;
    } catch {
      this.learnerSeen = false;
      return; // the local etcd is not up (yet): nothing to promote
    }
    try {
      const result = await this.deps.promote(memberId);
      this.lastProblem = undefined;
      if (result.outcome === 'promoted') {
        logger.info('promoted the learner of this pod', { member: result.member, durationMs: result.durationMs });
      } else {
        logger.debug('the learner of this pod is not promoted yet', { outcome: result.outcome, phase: result.phase });
      }
    } catch (err) {
      const problem = isAgentError(err) ? `${err.code}: ${err.message}` : String(err);
      // Busy and "not yet" repeat every second while they last: log a change of problem, not each pass.
      const level = problem === this.lastProblem || isAgentError(err, 'busy') ? 'debug' : 'warn';
      this.lastProblem = problem;
      logger.log(level, 'could not promote the learner of this pod', { memberId, error: problem });
    }
  }
}
