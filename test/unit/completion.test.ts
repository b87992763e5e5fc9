import { answerOf, statusOf } from '../../agent/proto/completion';
import type { ActionName, ActionResult, Outcome, Phase } from '../../agent/proto/types';

function result(action: ActionName, outcome: Outcome, complete: boolean, phase?: Phase): ActionResult {
  return {
    action,
    outcome,
    complete,
    ...(phase === undefined ? {} : { phase }),
    member: {
      id: 'a1',
      name: 'etcd-3',
      peerURLs: ['http://etcd-3:2380'],
      clientURLs: [],
      isLearner: phase === 'learner',
      started: phase !== 'unstarted',
    },
    cluster: { id: 'c1', members: 4, voters: 3, learners: 1 },
    leaderTransferred: false,
    durationMs: 1,
  };
}

describe('"2xx means done" (requireComplete)', () => {
  it.each<[string, ActionResult, number, number | 'in-progress']>([
    ['a join that added a learner', result('memberJoin', 'added', false, 'unstarted'), 202, 'in-progress'],
    ['a join whose member has not started', result('memberJoin', 'in-progress', false, 'unstarted'), 202, 'in-progress'],
    ['a join whose learner is not in sync', result('memberJoin', 'in-progress', false, 'learner'), 202, 'in-progress'],
    ['a join that promoted the learner', result('memberJoin', 'promoted', true, 'voter'), 200, 200],
    ['a join of a started voter', result('memberJoin', 'already-member', true, 'voter'), 200, 200],
    ['a promote of a learner not in sync', result('memberPromote', 'in-progress', false, 'learner'), 202, 'in-progress'],
    ['a promote that promoted', result('memberPromote', 'promoted', true, 'voter'), 200, 200],
    ['a leave that removed', result('memberLeave', 'removed', true), 200, 200],
    ['a leave of an absent member', result('memberLeave', 'already-absent', true), 200, 200],
    ['a transfer that moved leadership', result('leaderTransfer', 'transferred', true), 200, 200],
    ['a transfer with nothing to do', result('leaderTransfer', 'not-leader', true), 200, 200],
  ])('when %s, then by default HTTP %d, and with requireComplete %p', (_what, reached, plain, strict) => {
    const byDefault = answerOf(reached, false);
    const required = answerOf(reached, true);

    expect(byDefault).toEqual({ kind: 'result', status: plain });
    expect(statusOf(reached)).toBe(plain);
    if (strict === 'in-progress') {
      expect(required.kind).toBe('error');
      if (required.kind !== 'error') return;
      expect(required.error).toMatchObject({ code: 'in-progress', status: 409, retryable: true });
      expect(required.error.message).toMatch(/^etcd-3: .*not yet a started voter; call again$/);
      expect(required.error.details).toEqual({ result: reached });
    } else {
      expect(required).toEqual({ kind: 'result', status: strict });
    }
  });

  it('when the member is unstarted (etcd lists it without a name), then the message names it by the requested name', () => {
    const reached = result('memberJoin', 'added', false, 'unstarted');
    reached.member = { ...(reached.member as NonNullable<ActionResult['member']>), name: '' };

    const answer = answerOf(reached, true, 'etcd-3');

    expect(answer.kind === 'error' && answer.error.message).toBe('etcd-3: added (unstarted), not yet a started voter; call again');
  });

  it('when an unfinished result names no member, then the message still says what is missing', () => {
    const reached = { ...result('memberJoin', 'in-progress', false, 'unstarted'), member: undefined };

    const answer = answerOf(reached, true);

    expect(answer.kind === 'error' && answer.error.message).toBe(
      'the member: in-progress (unstarted), not yet a started voter; call again',
    );
  });
});
