import { passRetry, type PassFailure } from '../../agent/membership/converge';

const failure = (f: Partial<PassFailure>): PassFailure => ({
  attempt: 1,
  transient: false,
  fromAct: false,
  everyVoterAnswered: true,
  actionRetries: false,
  ...f,
});

describe('passRetry, when a pass runs again', () => {
  it.each<[string, 'again' | 'settling' | 'stop', Partial<PassFailure>]>([
    ['the RPC the pass sent failed transiently (its answer may be lost)', 'again', { transient: true, fromAct: true }],
    ['the RPC failed transiently for the 20th time', 'again', { transient: true, fromAct: true, attempt: 20 }],
    ['the RPC failed transiently for the 21st time', 'stop', { transient: true, fromAct: true, attempt: 21 }],
    ['a read failed transiently (the cluster client already retried it)', 'stop', { transient: true, fromAct: false }],
    ['the RPC was refused for good (not transient)', 'stop', { fromAct: true, refusal: 'too-many-learners' }],
    ['the action retries this refusal (e.g. peer URL exists after an older read)', 'again', { fromAct: true, refusal: 'peer-url-exists', actionRetries: true }],
    ['etcd says "unhealthy cluster" while every voter answered (settling)', 'settling', { fromAct: true, refusal: 'unhealthy-cluster' }],
    ['etcd says "unhealthy cluster" and a voter is silent', 'stop', { fromAct: true, refusal: 'unhealthy-cluster', everyVoterAnswered: false }],
    ['the failure is the agent\'s own refusal (unsafe, busy)', 'stop', {}],
  ])('when %s, then: %s', (_what, verdict, f) => {
    expect(passRetry(failure(f))).toBe(verdict);
  });
});
