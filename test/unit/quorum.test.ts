import { isAgentError } from '../../agent/proto/errors';
import { checkRemoval, checkVoterAdd, faultTolerance, hasQuorum, quorumOf } from '../../agent/membership/quorum';
import { thrownBy } from '../helpers/thrown';

describe('quorum arithmetic', () => {
  it.each([
    // voters, unhealthy, quorum, hasQuorum, faultTolerance
    [0, 0, 1, false, 0],
    [1, 0, 1, true, 0],
    [1, 1, 1, false, 0],
    [2, 0, 2, true, 0],
    [2, 1, 2, false, 0],
    [2, 2, 2, false, 0],
    [3, 0, 2, true, 1],
    [3, 1, 2, true, 0],
    [3, 2, 2, false, 0],
    [3, 3, 2, false, 0],
    [4, 0, 3, true, 1],
    [4, 1, 3, true, 0],
    [4, 2, 3, false, 0],
    [4, 3, 3, false, 0],
    [5, 0, 3, true, 2],
    [5, 1, 3, true, 1],
    [5, 2, 3, true, 0],
    [5, 3, 3, false, 0],
    [7, 0, 4, true, 3],
    [7, 1, 4, true, 2],
    [7, 2, 4, true, 1],
    [7, 3, 4, true, 0],
  ])(
    'when %i voters have %i unhealthy, then quorum is %i, hasQuorum is %s and fault tolerance is %i',
    (voters, unhealthy, quorum, quorate, tolerance) => {
      const healthy = voters - unhealthy;
      expect(quorumOf(voters)).toBe(quorum);
      expect(hasQuorum(voters, healthy)).toBe(quorate);
      expect(faultTolerance(voters, healthy)).toBe(tolerance);
    },
  );

  it.each([
    ['negative voters', () => quorumOf(-1)],
    ['fractional voters', () => quorumOf(1.5)],
    ['more healthy than voters', () => hasQuorum(3, 4)],
    ['negative healthy', () => faultTolerance(3, -1)],
    ['NaN voters', () => checkVoterAdd({ voters: Number.NaN, healthyVoters: 0, name: 'etcd-0' })],
  ])('when counts are invalid (%s), then it throws internal', (_what, call) => {
    const thrown = thrownBy(call);
    expect(isAgentError(thrown, 'internal')).toBe(true);
  });
});

describe('checkVoterAdd', () => {
  it.each([
    // voters, healthy, quorum after the add, message (undefined = safe)
    [0, 0, 1, 'adding etcd-3 as a voter makes 1 voter with 0 healthy; quorum needs 1'],
    [1, 1, 2, 'adding etcd-3 as a voter makes 2 voters with 1 healthy; quorum needs 2'],
    [2, 2, 2, undefined],
    [2, 1, 2, 'adding etcd-3 as a voter makes 3 voters with 1 healthy; quorum needs 2'],
    [3, 3, 3, undefined],
    [3, 2, 3, 'adding etcd-3 as a voter makes 4 voters with 2 healthy; quorum needs 3'],
    [4, 4, 3, undefined],
    [4, 3, 3, undefined],
    [4, 2, 3, 'adding etcd-3 as a voter makes 5 voters with 2 healthy; quorum needs 3'],
    [5, 4, 4, undefined],
    [5, 3, 4, 'adding etcd-3 as a voter makes 6 voters with 3 healthy; quorum needs 4'],
    [7, 5, 5, undefined],
    [7, 4, 5, 'adding etcd-3 as a voter makes 8 voters with 4 healthy; quorum needs 5'],
  ])(
    'when %i voters with %i healthy get a voter, then quorum needs %i and the message is %s',
    (voters, healthyVoters, required, message) => {
      const verdict = checkVoterAdd({ voters, healthyVoters, name: 'etcd-3' });
      if (message === undefined) {
        expect(verdict).toEqual({ safe: true });
      } else {
        expect(verdict).toEqual({
          safe: false,
          forceable: false,
          message,
          details: { voters, healthyVoters, required, votersAfter: voters + 1 },
        });
      }
    },
  );
});

describe('checkRemoval', () => {
  it.each([
    // voters, healthy, target healthy, message (undefined = safe)
    [2, 2, true, undefined],
    [2, 1, true, 'removing etcd-1 leaves 0 healthy voters of 1; quorum needs 1'],
    [2, 1, false, undefined],
    [3, 3, true, undefined],
    [3, 2, true, 'removing etcd-1 leaves 1 healthy voter of 2; quorum needs 2'],
    [3, 2, false, undefined],
    [3, 1, false, 'removing etcd-1 leaves 1 healthy voter of 2; quorum needs 2'],
    [4, 4, true, undefined],
    [4, 3, true, undefined],
    [4, 2, true, 'removing etcd-1 leaves 1 healthy voter of 3; quorum needs 2'],
    [4, 2, false, undefined],
    [5, 4, true, undefined],
    [5, 3, true, 'removing etcd-1 leaves 2 healthy voters of 4; quorum needs 3'],
    [5, 3, false, undefined],
    [7, 5, true, undefined],
    [7, 4, true, 'removing etcd-1 leaves 3 healthy voters of 6; quorum needs 4'],
    [7, 4, false, undefined],
  ])('when %i voters with %i healthy lose a voter (healthy: %s), then the message is %s', (voters, healthyVoters, healthy, message) => {
    const verdict = checkRemoval({ voters, healthyVoters, target: { name: 'etcd-1', isVoter: true, healthy } });
    expect(verdict.safe ? undefined : verdict.message).toBe(message);
    if (!verdict.safe) expect(verdict.forceable).toBe(true);
  });

  it('when removal is unsafe, then the details carry the counts before and after', () => {
    expect(checkRemoval({ voters: 3, healthyVoters: 2, target: { name: 'etcd-1', isVoter: true, healthy: true } })).toEqual({
      safe: false,
      forceable: true,
      message: 'removing etcd-1 leaves 1 healthy voter of 2; quorum needs 2',
      details: { voters: 3, healthyVoters: 2, required: 2, remainingVoters: 2, remainingHealthyVoters: 1 },
    });
  });

  it.each([
    ['a healthy last voter', 1, 1, true],
    ['an unhealthy last voter', 1, 0, false],
  ])('when removing %s, then it is unsafe and not forceable', (_what, voters, healthyVoters, healthy) => {
    expect(checkRemoval({ voters, healthyVoters, target: { name: 'etcd-0', isVoter: true, healthy } })).toEqual({
      safe: false,
      forceable: false,
      message: 'removing etcd-0 would remove the last voter',
      details: { voters, healthyVoters, required: 1, remainingVoters: 0, remainingHealthyVoters: 0 },
    });
  });

  it('when removing the only started voter beside an unstarted voter, then it is unsafe and not forceable', () => {
    const verdict = checkRemoval({
      voters: 2,
      healthyVoters: 1,
      startedVoters: 1,
      target: { name: 'etcd-0', isVoter: true, healthy: true },
    });

    expect(verdict).toMatchObject({ safe: false, forceable: false, message: 'removing etcd-0 would remove the last voter' });
  });

  it.each([
    ['a learner from a cluster without quorum', 3, 1, true],
    ['an unstarted member beside a single voter', 1, 1, false],
    ['a learner beside a single unhealthy voter', 1, 0, true],
  ])('when removing %s, then it is safe', (_what, voters, healthyVoters, healthy) => {
    expect(checkRemoval({ voters, healthyVoters, target: { name: 'etcd-3', isVoter: false, healthy } })).toEqual({
      safe: true,
    });
  });
});
