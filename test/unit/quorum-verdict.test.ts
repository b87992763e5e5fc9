import { isNoQuorum, noQuorumError, provesNoQuorum, quorumVerdict, type QuorumEvidence } from '../../agent/membership/quorum-verdict';
import { AgentError } from '../../agent/proto/errors';

describe('quorumVerdict', () => {
  it.each<[string, string, QuorumEvidence | undefined]>([
    ['nothing could be looked at', 'unknown', undefined],
    ['no voter is known', 'unknown', { voters: 0, answering: 0, leader: false }],
    ['4 voters, 2 killed (the issue)', 'no-quorum 2/4 need 3', { voters: 4, answering: 2, leader: false }],
    ['4 voters, 2 killed, the survivors still name the old leader', 'no-quorum 2/4 need 3', { voters: 4, answering: 2, leader: true }],
    ['3 voters, 1 answers', 'no-quorum 1/3 need 2', { voters: 3, answering: 1, leader: false }],
    ['3 voters, none answers', 'no-quorum 0/3 need 2', { voters: 3, answering: 0, leader: false }],
    ['1 voter, silent', 'no-quorum 0/1 need 1', { voters: 1, answering: 0, leader: false }],
    ['3 voters, the leader killed, the other two electing', 'electing 2/3 need 2', { voters: 3, answering: 2, leader: false }],
    ['4 voters, 3 answer, no leader yet', 'electing 3/4 need 3', { voters: 4, answering: 3, leader: false }],
    ['3 voters, the leader killed, the other two still name it', 'leader 2/3 need 2', { voters: 3, answering: 2, leader: true }],
    ['every voter answers and names one leader', 'leader 5/5 need 3', { voters: 5, answering: 5, leader: true }],
    ['5 voters, 3 answer (an unstarted voter counts as silent)', 'leader 3/5 need 3', { voters: 5, answering: 3, leader: true }],
    ['more answers than voters (a member counted twice) is capped', 'leader 3/3 need 2', { voters: 3, answering: 4, leader: true }],
  ])('when %s, then %s', (_what, expected, evidence) => {
    const verdict = quorumVerdict(evidence);
    const said =
      verdict.kind === 'unknown' ? 'unknown' : `${verdict.kind} ${verdict.healthyVoters}/${verdict.voters} need ${verdict.required}`;
    expect(said).toBe(expected);
  });
});

describe('provesNoQuorum', () => {
  it.each<[string, boolean, QuorumEvidence | undefined]>([
    ['nothing could be looked at', false, undefined],
    ['a quorum answers', false, { voters: 3, answering: 2, leader: true, outOfTime: 1 }],
    ['4 voters, 2 refused (killed)', true, { voters: 4, answering: 2, leader: false }],
    ['4 voters, 2 refused, none ran out of time', true, { voters: 4, answering: 2, leader: false, outOfTime: 0 }],
    [
      '3 voters, 1 answers, the other 2 ran out of time (an agent held up)',
      false,
      { voters: 3, answering: 1, leader: false, outOfTime: 2 },
    ],
    [
      '3 voters, 1 answers, 1 ran out of time, 1 refused: that one would make the quorum',
      false,
      { voters: 3, answering: 1, leader: false, outOfTime: 1 },
    ],
    ['3 voters, none answers, all ran out of time', false, { voters: 3, answering: 0, leader: false, outOfTime: 3 }],
    ['5 voters, 1 answers, 1 ran out of time, 3 refused', true, { voters: 5, answering: 1, leader: false, outOfTime: 1 }],
    ['1 voter, it ran out of time', false, { voters: 1, answering: 0, leader: false, outOfTime: 1 }],
    [
      '3 voters by a list read before, 1 answers, 2 refused: members may have changed since',
      false,
      { voters: 3, answering: 1, leader: false, outOfTime: 0, listedBefore: true },
    ],
    [
      '3 voters by a list read before, none answers, all refused',
      true,
      { voters: 3, answering: 0, leader: false, outOfTime: 0, listedBefore: true },
    ],
    [
      '3 voters by a list read in the look, 1 answers, 2 refused',
      true,
      { voters: 3, answering: 1, leader: false, outOfTime: 0, listedBefore: false },
    ],
  ])('when %s, then %s', (_what, expected, evidence) => {
    expect(provesNoQuorum(evidence)).toBe(expected);
  });
});

describe('noQuorumError', () => {
  it('when no quorum answers, then the error is a retryable 503 unavailable naming the figures and the step, with them in details', () => {
    const err = noQuorumError({ voters: 4, healthyVoters: 2, required: 3 }, 'reading the member list');

    expect(err).toBeInstanceOf(AgentError);
    expect(err.toBody()).toEqual({
      code: 'unavailable',
      message: expect.stringMatching(/^no quorum: 2 of 4 voters answer, 3 needed; .*\(reading the member list\)$/),
      retryable: true,
      details: { voters: 4, healthyVoters: 2, required: 3 },
    });
    expect(err.status).toBe(503);
  });

  it('when an error is another unavailable, then isNoQuorum says no', () => {
    expect(isNoQuorum(noQuorumError({ voters: 3, healthyVoters: 1, required: 2 }, 'x'))).toBe(true);
    expect(
      isNoQuorum(new AgentError('unavailable', 'no quorum: looks alike', { details: { voters: 3, healthyVoters: 1, required: 2 } })),
    ).toBe(false);
    expect(isNoQuorum(new Error('no quorum'))).toBe(false);
  });
});
