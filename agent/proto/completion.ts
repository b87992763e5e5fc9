/**
 * "2xx means done" (`requireComplete`): how a mutating v1 call answers, from the
 * result the membership service reached. Pure.
 *
 * By default a change still under way answers 202 (docs/api.md §4). A caller that
 * reads any 2xx as success, as KubeBlocks' HTTP actions do, sends
 * `"requireComplete": true`: then only the end state (a started voter for join
 * and promote; absent for leave; leadership settled for transfer) answers 2xx,
 * and anything short of it is the retryable 409 `in-progress` envelope, whose
 * message says what was reached and whose `details` carry the result.
 *
 * The field is named for what the caller requires of the answer, and is not
 * `complete`: that is the answer's own field, and a request field of the same
 * name would read as a claim ("it is complete") rather than a demand.
 */
import { AgentError } from './errors';
import type { ActionResult } from './types';

/** How to answer a result: a status with the result as body, or an error envelope. */
export type CompletionAnswer = { kind: 'result'; status: number } | { kind: 'error'; error: AgentError };

/** 202 while the member is still on its way (`added`, `in-progress`), else 200 (docs/api.md §4). */
export function statusOf(result: ActionResult): number {
  return result.outcome === 'added' || result.outcome === 'in-progress' ? 202 : 200;
}

/**
 * The answer to `result`; with `requireComplete`, a result that is not complete is an `in-progress`
 * error. `requestedName` names the member in the message (an unstarted member has no name yet).
 */
export function answerOf(result: ActionResult, requireComplete: boolean, requestedName?: string): CompletionAnswer {
  if (!requireComplete || result.complete) return { kind: 'result', status: statusOf(result) };
  const name = requestedName || result.member?.name || result.member?.id || 'the member';
  const phase = result.phase === undefined ? '' : ` (${result.phase})`;
  return {
    kind: 'error',
    error: new AgentError('in-progress', `${name}: ${result.outcome}${phase}, not yet ${endStateOf(result)}; call again`, {
      details: { result },
    }),
  };
}

function endStateOf(result: ActionResult): string {
  switch (result.action) {
    case 'memberJoin':
    case 'memberPromote':
      return 'a started voter';
    case 'memberLeave':
      return 'absent';
    case 'leaderTransfer':
      return 'settled';
  }
}
