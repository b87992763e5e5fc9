/**
 * The one retry of membership: a pass (read, decide, act) runs again only when a new read can
 * change the answer — after an act whose answer may have been lost (a transient failure of the RPC
 * the pass sent: the next read finds it done or not), after a refusal the action names (e.g. etcd
 * served an older member list than the one it checked against), or while etcd refuses changes as
 * "unhealthy cluster" although every voter answers (etcd settling for 5 s after a peer connects).
 * A read that failed is not retried here: the cluster client already retried it inside the deadline.
 */
import pRetry from 'p-retry';
import { etcdRefusal, isTransient, type EtcdRefusal } from '../etcd/errors';
import { AgentError } from '../proto/errors';
import type { ActionRun } from './run';

/** Passes a call may run again after transient failures of its act (the deadline bounds them too). */
const MAX_TRANSIENT_PASSES = 20;
/** A pass is not begun with less than this left: the answer needs the time. */
const PASS_RESERVE_MS = 600;

/** A failure besides transient ones after which the action wants the pass run again. */
export type RetryFilter = (err: unknown, attempt: number) => boolean;

/** What is known of a failed pass, for the retry rule. */
export interface PassFailure {
  /** 1 for the first pass. */
  attempt: number;
  /** etcd failed in a way worth another try (etcd/errors.ts `isTransient`). */
  transient: boolean;
  /** The failure is the answer of the RPC the pass sent (not of a read). */
  fromAct: boolean;
  refusal?: EtcdRefusal;
  /** The last probe of this call found every voter answering. */
  everyVoterAnswered: boolean;
  /** The action's own filter accepts it. */
  actionRetries: boolean;
}

/** Run the pass again (`again`), wait out etcd settling (`settling`), or answer the failure (`stop`). Pure. */
export function passRetry(f: PassFailure): 'again' | 'settling' | 'stop' {
  if (f.refusal === 'unhealthy-cluster' && f.everyVoterAnswered) return 'settling';
  if (f.transient && f.fromAct && f.attempt <= MAX_TRANSIENT_PASSES) return 'again';
  return f.actionRetries ? 'again' : 'stop';
}

/**
 * Runs `pass` until it answers, as `passRetry` rules, with backoff, inside the call's deadline.
 * An "unhealthy cluster" refusal that was waited on and still stands says how long it waited
 * (`details.waitedMs`).
 */
export async function converge<T>(run: ActionRun, pass: () => Promise<T>, alsoRetry: RetryFilter = () => false): Promise<T> {
  let settlingSince: number | undefined;
  const log = { action: run.action, requestId: run.context.requestId };
  try {
    const result = await pRetry(pass, {
      // The deadline and passRetry bound the passes.
      retries: 1000,
      minTimeout: 100,
      maxTimeout: 500,
      onFailedAttempt: (err) => {
        const verdict = passRetry(failureOf(run, err, err.attemptNumber, alsoRetry));
        if (verdict === 'settling') settlingSince ??= Date.now();
        if (verdict === 'stop' || run.deadline.remainingMs() < PASS_RESERVE_MS) throw err;
        run.deps.logger.debug(verdict === 'settling' ? 'etcd refuses changes while a peer settles; retrying' : 'reading again after a failed pass', {
          ...log,
          error: err.message,
        });
      },
    });
    if (settlingSince !== undefined) {
      run.deps.logger.info('etcd accepted the change after refusing it as "unhealthy cluster"', { ...log, waitedMs: Date.now() - settlingSince });
    }
    return result;
  } catch (err) {
    throw settlingSince === undefined ? err : withWait(run, err, settlingSince);
  }
}

function failureOf(run: ActionRun, err: unknown, attempt: number, alsoRetry: RetryFilter): PassFailure {
  const probe = run.lastProbe;
  return {
    attempt,
    transient: isTransient(err),
    fromAct: run.isActFailure(err),
    refusal: etcdRefusal(err),
    everyVoterAnswered: probe !== undefined && probe.voters.length > 0 && probe.healthyVoters === probe.voters.length,
    actionRetries: alsoRetry(err, attempt),
  };
}

/** An "unhealthy cluster" refusal that was waited on: says so, and for how long. */
function withWait(run: ActionRun, err: unknown, since: number): unknown {
  if (!(err instanceof AgentError) || etcdRefusal(err) !== 'unhealthy-cluster') return err;
  const waitedMs = Date.now() - since;
  const stillSettling = passRetry(failureOf(run, err, 1, () => false)) === 'settling';
  const why = stillSettling
    ? `etcd still refused the change as "unhealthy cluster" after ${waitedMs} ms of retries, although every voter answered its status call`
    : `etcd refused the change as "unhealthy cluster"; it was retried for ${waitedMs} ms, until a voter stopped answering`;
  return new AgentError(err.code, why, { cause: err.cause, retryable: err.retryable, details: { ...err.details, waitedMs } });
}
