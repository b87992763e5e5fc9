/**
 * No quorum, no waiting: a call that etcd answers only through a quorum (the member list,
 * the membership lock, the operation records) answers `unavailable` as soon as no quorum of voters
 * answers, instead of spending its whole deadline on a cluster that cannot decide anything.
 *
 * The call itself runs unchanged. When it has not answered within `CHECK_AFTER_MS` (a quorum read takes a
 * few milliseconds), the gate looks at the voters — through the shared health observation while it
 * is fresh (no etcd call) when that proves no quorum, or began after the call and finds one; else by
 * a quick probe: a member list as one member holds it (no quorum needed) and a Status call to each
 * member, bounded by `ETCD_AGENT_STATUS_TIMEOUT_MS`, asked once more, with twice that, of the voters
 * that did not answer when the first round finds no quorum — and again every status timeout while
 * the call waits. quorum-verdict.ts decides: when no quorum answers, the call's own deadline is cut
 * (its etcd calls stop retrying) and it answers `unavailable` with the figures, and the refusal is
 * logged with whose look it was and the voters it found silent; during an election, or when it
 * cannot tell, the call goes on waiting inside its deadline.
 *
 * An observation's silence that only ran out of time is no proof (`provesNoQuorum`): its budget is
 * under the max age, and a pause of the agent's own process, longer than what is left of it, leaves
 * every Status call in flight without its answer. The probe, which asks such voters again with
 * twice the status timeout, decides then. So does it when the observation counted the voters by a
 * member list read before it while some member answered: that list may lack members added since.
 *
 * Looks are shared: calls waiting at the same time cause one probe, not one each.
 */
import type { Config } from '../config/config';
import { Deadline } from '../lib/deadline';
import type { EtcdCluster } from '../etcd/cluster-client';
import type { Logger } from '../observability/logger';
import { probeMembers, reaskSilent, type ClusterProbe } from './probe';
import { noQuorumError, provesNoQuorum, quorumVerdict, type QuorumEvidence, type QuorumVerdict } from './quorum-verdict';

/** How long a call through a quorum may take before the gate looks at the voters. */
const CHECK_AFTER_MS = 100;
/** Shortest pause between two looks while a call waits. */
const MIN_RECHECK_MS = 250;

/** A voter that did not answer a look, and why: what the log of a refusal names. */
export interface SilentVoter {
  member: string;
  error: string;
}

/** The voters as the shared health observation saw them (health/observer.ts `quorumEvidence`). */
export interface ObservedVoters {
  evidence: QuorumEvidence;
  /** When that observation started (`performance.now()`). */
  startedAt: number;
  silent: SilentVoter[];
}

/** One look: its verdict, whose look it was, and the voters it found silent. */
interface Look {
  verdict: QuorumVerdict;
  by: 'observation' | 'probe';
  silent: SilentVoter[];
}

/** What the gate looks with. */
export interface QuorumGateDeps {
  cluster: Pick<EtcdCluster, 'localMemberList' | 'memberStatus'>;
  config: Pick<Config, 'statusTimeoutMs'>;
  /** The voters as the shared health observation saw them while it is fresh (no I/O); else undefined. */
  observed?: () => ObservedVoters | undefined;
  /** Where a refusal is logged (warn), and a probe's findings (debug). */
  logger?: Logger;
}

/** Gates calls through a quorum; one per agent (or per prepare run). */
export class QuorumGate {
  private look?: { startedAt: number; verdict: Promise<Look> };

  constructor(private readonly deps: QuorumGateDeps) {}

  /**
   * Runs `call` with a deadline of its own (a child of `deadline`) and answers what it answers,
   * unless a look finds no quorum first: then throws `unavailable` naming `step` and the figures,
   * and cuts the call's deadline. `late` receives a value the call answers after that (a lock taken
   * too late, to release).
   */
  through<T>(deadline: Deadline, step: string, call: (deadline: Deadline) => Promise<T>, late?: (value: T) => unknown): Promise<T> {
    const own = deadline.child();
    const since = performance.now();
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const settle = (): boolean => {
        if (settled) return false;
        settled = true;
        clearTimeout(timer);
        return true;
      };
      call(own).then(
        (value) => {
          if (settle()) resolve(value);
          else if (late !== undefined)
            void Promise.resolve()
              .then(() => late(value))
              .catch(() => undefined);
        },
        (err: unknown) => {
          if (settle()) reject(err);
        },
      );
      const watch = (): void => {
        if (settled || deadline.expired()) return;
        this.verdict(since).then(
          ({ verdict, by, silent }) => {
            if (settled) return;
            if (verdict.kind === 'no-quorum') {
              settle();
              own.cut();
              const { voters, healthyVoters, required } = verdict;
              this.deps.logger?.warn('no quorum of voters answers: the call answers unavailable', {
                step,
                voters,
                healthyVoters,
                required,
                by,
                silent,
              });
              reject(noQuorumError(verdict, step));
              return;
            }
            timer = setTimeout(watch, Math.max(MIN_RECHECK_MS, this.deps.config.statusTimeoutMs));
          },
          () => undefined,
        );
      };
      timer = setTimeout(watch, CHECK_AFTER_MS);
    });
  }

  /**
   * A look at the voters now, for a call waiting since `since` (`performance.now()`): the fresh
   * health observation's when it proves no quorum, or when it started after the call did and finds
   * one (an older one saying "quorum" may predate the loss the call is stuck on); else a quick
   * probe's, shared with the calls that asked within the last status timeout.
   */
  verdict(since = performance.now()): Promise<Look> {
    const observed = this.deps.observed?.();
    if (observed !== undefined) {
      const verdict = quorumVerdict(observed.evidence);
      const usable = verdict.kind === 'no-quorum' ? provesNoQuorum(observed.evidence) : observed.startedAt >= since;
      if (usable) return Promise.resolve({ verdict, by: 'observation', silent: observed.silent });
    }
    const now = performance.now();
    if (this.look === undefined || now - this.look.startedAt > this.deps.config.statusTimeoutMs) {
      this.look = { startedAt: now, verdict: this.probe() };
    }
    return this.look.verdict;
  }

  /** A quick probe: the members as one member holds them, then a Status call to each; never throws. */
  private async probe(): Promise<Look> {
    const { cluster, config } = this.deps;
    try {
      const list = await cluster.localMemberList(Deadline.in(config.statusTimeoutMs));
      let probe = await probeMembers(cluster, list.members, config.statusTimeoutMs);
      let verdict = verdictOf(probe);
      if (verdict.kind === 'no-quorum') {
        // Asked once more, with twice the time, before the cluster is called `unavailable`: a voter
        // that answered late once (a busy node, a channel still connecting) is not a voter down.
        probe = await reaskSilent(cluster, probe, 2 * config.statusTimeoutMs);
        verdict = verdictOf(probe);
      }
      const silent = probe.probes
        .filter((p) => p.status === undefined && !p.member.isLearner)
        .map((p) => ({ member: p.member.name || p.member.id, error: p.error ?? 'no answer' }));
      this.deps.logger?.debug('quorum gate: probed the voters', { verdict: verdict.kind, silent });
      return { verdict, by: 'probe', silent };
    } catch (err) {
      this.deps.logger?.debug('quorum gate: no member list to probe by', { error: err instanceof Error ? err.message : String(err) });
      return { verdict: { kind: 'unknown' }, by: 'probe', silent: [] };
    }
  }
}

function verdictOf(probe: ClusterProbe): QuorumVerdict {
  return quorumVerdict({ voters: probe.voters.length, answering: probe.healthyVoters, leader: probe.leader !== undefined });
}
