/**
 * The agent of a learner's own pod promotes its member by itself as soon as
 * etcd accepts (docs/api.md §4 join), so a learner that nobody calls again still
 * becomes a voter. Cheap when there is nothing to do: one Status of the local
 * etcd per interval. It logs and counts what it does and never throws.
 *
 * While the local etcd does not answer, the loop looks from the voters' side instead: when this
 * pod's member is listed as joining (a learner, or unstarted) and its etcd stays silent, it writes
 * once through the quorum, which lets a new member that restored a snapshot on an idle cluster
 * apply and start serving (apply-nudge-decision.ts has the rule and why).
 */
import type { Config } from '../config/config';
import { Deadline, settledWithin } from '../lib/deadline';
import { writeApplyNudge } from '../etcd/apply-nudge';
import type { EtcdCluster } from '../etcd/cluster-client';
import type { Logger } from '../observability/logger';
import type { Metrics } from '../observability/metrics';
import { isAgentError } from '../proto/errors';
import type { ActionResult, Member } from '../proto/types';
import { decideNudge, nudgeMayBeDue } from './apply-nudge-decision';
import { matchMember } from './match';

/** What the loop needs: the local Status, and the promote action (counted and locked as any call). */
export interface AutoPromoterDeps {
  cluster: EtcdCluster;
  config: Pick<Config, 'localEndpoint' | 'statusTimeoutMs' | 'memberName' | 'localPeerUrl' | 'keyPrefix'>;
  logger: Logger;
  metrics?: Pick<Metrics, 'applyNudges'>;
  promote: (memberId: string) => Promise<ActionResult>;
  intervalMs?: number;
}

/** Interval while the local member is not a learner: one local Status call a second, and a new learner is seen within a second. */
export const AUTO_PROMOTE_INTERVAL_MS = 1000;
/** Interval while the local member is a learner: promotion should follow sync within a second. */
const LEARNER_INTERVAL_MS = 250;
/**
 * The first look, soon after start but not in it: it loads etcd3 and gRPC (etcd3-module.ts), which
 * would otherwise hold up the agent's first `/readyz`; a learner already in sync waits that much longer.
 */
const FIRST_LOOK_MS = 250;
/** How long `stop` waits for a pass in flight: shutdown's budget cannot spare a pass's whole deadline. */
const STOP_WAIT_MS = 1000;
/** Deadline of the member-list read and of the write of one nudge: a pass must end well before the next. */
const NUDGE_CALL_MS = 4000;
/** While the local etcd is silent, the member list is read at most this often: a stopped member's agent must not load the quorum. */
const LIST_EVERY_MS = 2000;

/** A background loop; `start` once, `stop` on shutdown. */
export class AutoPromoter {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;
  private lastProblem?: string;
  /** The last look found the local member a learner: look again soon, it may be in sync any moment. */
  private learnerSeen = false;
  /** Since when the local etcd has not answered; undefined while it answers. */
  private silentSince?: number;
  /** When the last nudge was written, and how many this silence has had. */
  private lastNudgeAt?: number;
  /** When the member list was last read for a nudge. */
  private lastListAt?: number;
  private nudgesThisSilence = 0;

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
      await settledWithin(this.running, STOP_WAIT_MS);
    }
  }

  private schedule(delayMs = this.learnerSeen ? LEARNER_INTERVAL_MS : (this.deps.intervalMs ?? AUTO_PROMOTE_INTERVAL_MS)): void {
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
      // The local etcd is not up, or is up and not serving yet: look from the voters' side.
      await this.whileSilent();
      return;
    }
    this.silentSince = undefined;
    this.nudgesThisSilence = 0;
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
  /** One look while the local etcd is silent: is this pod's member joining? Then nudge it when due. */
  private async whileSilent(): Promise<void> {
    const { cluster, config, logger } = this.deps;
    const now = Date.now();
    this.silentSince ??= now;
    const facts = {
      localSilentForMs: now - this.silentSince,
      sinceLastNudgeMs: this.lastNudgeAt === undefined ? undefined : now - this.lastNudgeAt,
    };
    // The member list is read through the quorum: only when a nudge could be due, and not every pass.
    if (!nudgeMayBeDue(facts) || (this.lastListAt !== undefined && now - this.lastListAt < LIST_EVERY_MS)) return;
    this.lastListAt = now;
    let listed: Member | null | undefined;
    try {
      // The local etcd accepts calls and answers none: the voters are found through its peer listener.
      const deadline = Deadline.in(NUDGE_CALL_MS);
      await cluster.discoverMembers(deadline);
      const list = await cluster.listMembers(deadline);
      const found = matchMember(list.members, {
        name: config.memberName,
        peerURLs: config.localPeerUrl === undefined ? [] : [config.localPeerUrl],
      });
      listed = found.kind === 'match' ? found.member : found.kind === 'none' ? null : undefined;
    } catch (err) {
      // No quorum, or no voter reached: nothing could be written either.
      logger.debug("could not read the member list for this pod's silent member", { error: String(err) });
      listed = undefined;
    }
    if (decideNudge({ ...facts, listed }) !== 'nudge' || listed === undefined || listed === null) return;
    try {
      await writeApplyNudge(cluster, config.keyPrefix, listed.id, Deadline.in(NUDGE_CALL_MS));
      this.lastNudgeAt = Date.now();
      this.nudgesThisSilence += 1;
      this.deps.metrics?.applyNudges.inc({ result: 'written' });
      // The first of a silence at info, so the log says why the member started serving; repeats at debug.
      logger.log(
        this.nudgesThisSilence === 1 ? 'info' : 'debug',
        "wrote once through the quorum so that this pod's joining member applies and serves",
        {
          member: listed.id,
          silentForMs: facts.localSilentForMs,
          nudges: this.nudgesThisSilence,
        },
      );
    } catch (err) {
      this.deps.metrics?.applyNudges.inc({ result: 'failed' });
      logger.debug("could not write through the quorum for this pod's joining member", { member: listed.id, error: String(err) });
    }
  }
}
