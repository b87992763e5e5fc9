import { answerAfterSettling, passRetry, type PassFailure } from '../../agent/membership/converge';
import { AgentError } from '../../agent/proto/errors';

const failure = (f: Partial<PassFailure>): PassFailure => ({
  attempt: 1,
  transient: false,
  failedIn: 'act',
  changeInFlight: false,
  everyVoterAnswered: true,
  actionRetries: false,
  ...f,
});

describe('passRetry, when a pass runs again', () => {
  it.each<[string, 'again' | 'settling' | 'stop', Partial<PassFailure>]>([
    ['the RPC the pass sent failed transiently (its answer may be lost)', 'again', { transient: true }],
    ['the RPC failed transiently for the 20th time', 'again', { transient: true, attempt: 20 }],
    ['the RPC failed transiently for the 21st time', 'stop', { transient: true, attempt: 21 }],
    ['a read failed transiently (the cluster client already retried it)', 'stop', { transient: true, failedIn: 'read' }],
    [
      'a read failed transiently after an RPC of this call failed so (its change may be applied)',
      'again',
      { transient: true, failedIn: 'read', changeInFlight: true },
    ],
    ['the probe under the lock found no quorum (a blip: probe again)', 'again', { transient: true, failedIn: 'other' }],
    ['the RPC was refused for good (not transient)', 'stop', { refusal: 'too-many-learners' }],
    [
      'the action retries this refusal (e.g. peer URL exists after an older read)',
      'again',
      { refusal: 'peer-url-exists', actionRetries: true },
    ],
    ['etcd says "unhealthy cluster" while every voter answered (settling)', 'settling', { refusal: 'unhealthy-cluster' }],
    ['etcd says "unhealthy cluster" and a voter is silent', 'stop', { refusal: 'unhealthy-cluster', everyVoterAnswered: false }],
    ["the failure is the agent's own refusal (unsafe, busy)", 'stop', { failedIn: 'other' }],
  ])('when %s, then: %s', (_what, verdict, f) => {
    expect(passRetry(failure(f))).toBe(verdict);
  });
});

describe('answerAfterSettling: what answers a call etcd refused as "unhealthy cluster"', () => {
  const refusal = new AgentError('unsafe', 'etcdserver: unhealthy cluster');
  const timeout = new AgentError('timeout', 'the deadline passed while reading the member list');
  const unavailable = new AgentError('unavailable', 'no quorum');
  it.each<[string, AgentError, AgentError | undefined, PassFailure['failedIn'], boolean, AgentError]>([
    ['the last pass was refused again', refusal, refusal, 'act', false, refusal],
    ['the deadline ended the next pass while it read the member list', timeout, refusal, 'read', false, refusal],
    ['the deadline ended the next pass while it probed', timeout, refusal, 'other', false, refusal],
    ['the deadline ended the next pass while its change was in flight (it may be applied)', timeout, refusal, 'act', false, timeout],
    ["an earlier pass's change is in doubt", timeout, refusal, 'read', true, timeout],
    ['the next pass found no quorum', unavailable, refusal, 'read', false, unavailable],
    ['no refusal was waited on', timeout, undefined, 'read', false, timeout],
  ])('when %s', (_what, last, waited, failedIn, inFlight, expected) => {
    expect(answerAfterSettling(last, waited, failedIn, inFlight)).toBe(expected);
  });
});
