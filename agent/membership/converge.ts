/**
 * The one retry of membership: a pass (read, probe, decide, act) runs again after a transient
 * failure (the RPC's answer may have been lost: the next read finds the change done or not; a
 * probe saw a blip), after a refusal the action names (e.g. etcd served an older member list than
 * the one it checked against), or while etcd refuses changes as "unhealthy cluster" although every
 * voter answers (etcd settling for 5 s after a peer connects). A failed member-list read is not
 * retried here, as the cluster client already retried it inside the deadline — unless an RPC of
 * this call failed before it: then the change may be applied, and the call reads until it knows.
 */
import pRetry from 'p-retry';
import type { Deadline } from '../lib/deadline';
import { etcdRefusal, isTransient, type EtcdRefusal } from '../etcd/errors';
import type { Logger } from '../observability/logger';
import { AgentError } from '../proto/errors';
import type { ClusterProbe } from './probe';

/**
 * What `converge` reads of the call whose passes it runs (run.ts's ActionRun is one): declared here,
 * so that this rule does not import the run that uses it.
 */
export interface ConvergingRun {
  readonly action: string;
  readonly deadline: Deadline;
  readonly context: { requestId?: string };
  readonly deps: { logger: Logger };
  /** The last probe of the call: says whether an "unhealthy cluster" refusal is etcd settling or real. */
  readonly lastProbe?: ClusterProbe;
  /** Where `err` came from: an RPC the call sent, one of its member-list reads, or elsewhere. */
  failedIn(err: unknown): 'act' | 'read' | 'other';
}

/** Passes a call may run again after transient failures of its act (the deadline bounds them too). */
const MAX_TRANSIENT_PASSES = 20;
/** A pass is not begun with less than this left: the answer needs the time. */
const PASS_RESERVE_MS = 600;
/** The first pause between two passes, doubled per pass up to `RETRY_MAX_DELAY_MS`: soon after a transient failure, then less often. */
const RETRY_MIN_DELAY_MS = 100;
/** The longest pause between two passes. */
const RETRY_MAX_DELAY_MS = 500;

/** A failure besides transient ones after which the action wants the pass run again. */
export type RetryFilter = (err: unknown, attempt: number) => boolean;

/** What is known of a failed pass, for the retry rule. */
export interface PassFailure {
  /** 1 for the first pass. */
  attempt: number;
  /** etcd failed in a way worth another try (etcd/errors.ts `isTransient`). */
  transient: boolean;
  /** Where the pass failed: the RPC it sent, the member-list read (retried by the client already), or elsewhere. */
  failedIn: 'act' | 'read' | 'other';
  /** An RPC of this call failed transiently before: its change may be applied. */
  changeInFlight: boolean;
  refusal?: EtcdRefusal;
  /** The last probe of this call found every voter answering. */
  everyVoterAnswered: boolean;
  /** The action's own filter accepts it. */
  actionRetries: boolean;
}

/** Run the pass again (`again`), wait out etcd settling (`settling`), or answer the failure (`stop`). Pure. */
export function passRetry(f: PassFailure): 'again' | 'settling' | 'stop' {
  if (f.refusal === 'unhealthy-cluster' && f.everyVoterAnswered) return 'settling';
  const retriedAlready = f.failedIn === 'read' && !f.changeInFlight;
  if (f.transient && !retriedAlready && f.attempt <= MAX_TRANSIENT_PASSES) return 'again';
  return f.actionRetries ? 'again' : 'stop';
}

/**
 * Runs `pass` until it answers, as `passRetry` rules, with backoff, inside the call's deadline.
 * An "unhealthy cluster" refusal that was waited on and still stands says how long it waited
 * (`details.waitedMs`).
 */
export async function converge<T>(run: ConvergingRun, pass: () => Promise<T>, alsoRetry: RetryFilter = () => false): Promise<T> {
  let settlingSince: number | undefined;
  /** The last "unhealthy cluster" refusal waited on, and where the last failure came from. */
  let refusal: unknown;
  let lastFailedIn: PassFailure['failedIn'] = 'other';
  let changeInFlight = false;
  const log = { action: run.action, requestId: run.context.requestId };
  try {
    const result = await pRetry(pass, {
      // The deadline and passRetry bound the passes.
      retries: 1000,
      minTimeout: RETRY_MIN_DELAY_MS,
      maxTimeout: RETRY_MAX_DELAY_MS,
      onFailedAttempt: (err) => {
        const failure = failureOf(run, err, err.attemptNumber, alsoRetry, changeInFlight);
        if (failure.failedIn === 'act' && failure.transient) changeInFlight = true;
        const verdict = passRetry(failure);
        lastFailedIn = failure.failedIn;
        if (verdict === 'settling') {
          settlingSince ??= Date.now();
          refusal = err;
        }
        // The pause before the next pass counts too: begun after it with less than the reserve left, a
        // pass could still have its change in flight at the deadline, answered then as a timeout (the
        // change may be applied) instead of the refusal it met (a loaded run: 504 for a 409).
        if (verdict === 'stop' || run.deadline.remainingMs() < PASS_RESERVE_MS + RETRY_MAX_DELAY_MS) throw err;
        run.deps.logger.debug(
          verdict === 'settling' ? 'etcd refuses changes while a peer settles; retrying' : 'reading again after a failed pass',
          {
            ...log,
            error: err.message,
          },
        );
      },
    });
    if (settlingSince !== undefined) {
      run.deps.logger.info('etcd accepted the change after refusing it as "unhealthy cluster"', {
        ...log,
        waitedMs: Date.now() - settlingSince,
      });
    }
    return result;
  } catch (err) {
    throw settlingSince === undefined ? err : withWait(run, answerAfterSettling(err, refusal, lastFailedIn, changeInFlight), settlingSince);
  }
}

/**
 * What answers a call whose passes etcd refused as "unhealthy cluster" (every voter answering):
 * the last failure, unless the deadline ended a later pass before it sent a change (while reading
 * or probing) and no change of an earlier pass is in doubt. Then nothing changed after that
 * refusal, and the refusal, waited on, is the answer (409 `unsafe` with `waitedMs`), not a bare
 * timeout: a pass begun with `PASS_RESERVE_MS` left can still run out of it when etcd answers slowly. A timeout while a
 * change was in flight stays a timeout: that change may be applied. Pure.
 */
export function answerAfterSettling(
  last: unknown,
  refusal: unknown,
  lastFailedIn: PassFailure['failedIn'],
  changeInFlight: boolean,
): unknown {
  const timedOut = last instanceof AgentError && last.code === 'timeout';
  return timedOut && refusal !== undefined && lastFailedIn !== 'act' && !changeInFlight ? refusal : last;
}

function failureOf(run: ConvergingRun, err: unknown, attempt: number, alsoRetry: RetryFilter, changeInFlight: boolean): PassFailure {
  const probe = run.lastProbe;
  return {
    attempt,
    transient: isTransient(err),
    failedIn: run.failedIn(err),
    changeInFlight,
    refusal: etcdRefusal(err),
    everyVoterAnswered: probe !== undefined && probe.voters.length > 0 && probe.healthyVoters === probe.voters.length,
    actionRetries: alsoRetry(err, attempt),
  };
}

/** An "unhealthy cluster" refusal that was waited on: says so, and for how long. */
function withWait(run: ConvergingRun, err: unknown, since: number): unknown {
  if (!(err instanceof AgentError) || etcdRefusal(err) !== 'unhealthy-cluster') return err;
  const waitedMs = Date.now() - since;
  const stillSettling = passRetry(failureOf(run, err, 1, () => false, false)) === 'settling';
  const why = stillSettling
    ? `etcd still refused the change as "unhealthy cluster" after ${waitedMs} ms of retries, although every voter answered its status call`
    : `etcd refused the change as "unhealthy cluster"; it was retried for ${waitedMs} ms, until a voter stopped answering`;
  return new AgentError(err.code, why, { cause: err.cause, retryable: err.retryable, details: { ...err.details, waitedMs } });
}
