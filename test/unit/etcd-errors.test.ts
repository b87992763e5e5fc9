import { BrokenCircuitError } from 'cockatiel';
import {
  ClientClosedError,
  EtcdAuthenticationFailedError,
  EtcdError,
  EtcdInvalidAuthTokenError,
  EtcdPermissionDeniedError,
  GRPCCancelledError,
  GRPCDeadlineExceededError,
  GRPCInternalError,
  GRPCUnauthenticatedError,
  GRPCUnavailableError,
  castGrpcError,
} from 'etcd3';
import { etcdRefusal, failureLine, isTransient, toAgentError, type EtcdRefusal } from '../../agent/etcd/errors';
import { AgentError, ERROR_CODES, ErrorCode, isAgentError } from '../../agent/proto/errors';

/** gRPC status names of the codes etcd answers with (grpc-js prefixes the message with "<code> <NAME>: "). */
const GRPC_NAMES: Record<number, string> = {
  1: 'CANCELLED',
  4: 'DEADLINE_EXCEEDED',
  5: 'NOT_FOUND',
  8: 'RESOURCE_EXHAUSTED',
  9: 'FAILED_PRECONDITION',
  11: 'OUT_OF_RANGE',
  14: 'UNAVAILABLE',
};

/** An etcd refusal as etcd3 hands it over: grpc-js's untyped error, cast by etcd3 into its typed class. */
function grpc(code: number, text: string): Error {
  return castGrpcError(Object.assign(new Error(`${code} ${GRPC_NAMES[code]}: ${text}`), { code }));
}

/** The contract's error table (docs/api.md §4 "Errors"), copied here so that a change to ERROR_CODES must be deliberate. */
const API_ERROR_TABLE: Array<[ErrorCode, number, boolean]> = [
  ['bad-request', 400, false],
  ['unauthorized', 401, false],
  ['forbidden', 403, false],
  ['not-found', 404, false],
  ['method-not-allowed', 405, false],
  ['conflict', 409, false],
  ['unsafe', 409, true],
  ['busy', 409, true],
  // Only with `requireComplete`, a change not yet at its end state.
  ['in-progress', 409, true],
  ['payload-too-large', 413, false],
  ['unsupported-media-type', 415, false],
  ['unavailable', 503, true],
  ['timeout', 504, true],
  ['internal', 500, false],
];

describe('ERROR_CODES', () => {
  it('when the codes are listed, then they are exactly the contract table', () => {
    expect(Object.keys(ERROR_CODES).sort()).toEqual(API_ERROR_TABLE.map(([code]) => code).sort());
  });

  it.each(API_ERROR_TABLE)('when the code is %s, then HTTP is %i and retryable is %s', (code, status, retryable) => {
    expect(ERROR_CODES[code]).toEqual({ status, retryable });
    const error = new AgentError(code, 'what happened');
    expect(error).toMatchObject({ code, status, retryable, message: 'what happened', name: 'AgentError' });
    expect(error.toBody()).toEqual({ code, message: 'what happened', retryable });
  });

  it('when an AgentError overrides retryable and carries details, then its body shows both', () => {
    const error = new AgentError('unavailable', 'no quorum', { retryable: false, details: { voters: 3 } });

    expect(error.status).toBe(503);
    expect(error.toBody()).toEqual({ code: 'unavailable', message: 'no quorum', retryable: false, details: { voters: 3 } });
    expect(isAgentError(error, 'unavailable')).toBe(true);
    expect(isAgentError(error, 'busy')).toBe(false);
  });
});

describe('toAgentError: etcd refusals by message text', () => {
  // [etcd's text (rpctypes/error.go), gRPC code etcd sends it with, contract code, agent message]
  it.each<[string, number, ErrorCode, string]>([
    ['etcdserver: unhealthy cluster', 14, 'unsafe', 'etcd refused the change: the cluster is unhealthy'],
    [
      'etcdserver: re-configuration failed due to not enough started members',
      9,
      'unsafe',
      'etcd refused the change: not enough started members',
    ],
    ['etcdserver: too many learner members in cluster', 9, 'busy', 'etcd allows one learner at a time and has one'],
    [
      'etcdserver: can only promote a learner member which is in sync with leader',
      9,
      'busy',
      'the learner is not yet in sync with the leader',
    ],
    [
      'etcdserver: can only promote a learner member',
      9,
      'conflict',
      'etcd refused the promotion: the member is not a learner (it is a voter already)',
    ],
    ['etcdserver: Peer URLs already exists', 9, 'conflict', 'the peer URL belongs to another member'],
    ['etcdserver: member ID already exist', 9, 'conflict', 'the member id already exists'],
    ['etcdserver: member not found', 5, 'not-found', 'etcd has no such member'],
    ['etcdserver: leader changed', 14, 'unavailable', 'the etcd leader changed during the call'],
    ['etcdserver: request timed out', 14, 'unavailable', 'etcd timed out the request'],
    ['etcdserver: request timed out, possibly due to previous leader failure', 14, 'unavailable', 'etcd timed out the request'],
    ['etcdserver: no leader', 14, 'unavailable', 'etcd has no leader'],
    ['etcdserver: not capable', 14, 'unavailable', 'etcd is not capable of this yet'],
    ['etcdserver: rpc not supported for learner', 14, 'unavailable', 'the member asked is a learner'], // etcd 3.4, 3.5
    ['etcdserver: rpc not supported for learner', 9, 'unavailable', 'the member asked is a learner'], // etcd 3.6, 3.7
  ])('when etcd answers "%s" (gRPC %i), then the code is %s', (text, grpcCode, code, message) => {
    for (const thrown of [new Error(text), grpc(grpcCode, text)]) {
      const error = toAgentError(thrown);

      expect(error).toBeInstanceOf(AgentError);
      expect(error).toMatchObject({ code, message, status: ERROR_CODES[code].status, retryable: ERROR_CODES[code].retryable });
      expect(error.details).toEqual({ etcd: thrown.message });
      expect(error.cause).toBe(thrown);
    }
  });

  it("when etcd's message spans several lines, then details keep only the first", () => {
    const error = toAgentError(new Error('etcdserver: member not found\n    at stack frame'));

    expect(error.details).toEqual({ etcd: 'etcdserver: member not found' });
  });
});

describe('toAgentError: etcd3 error classes', () => {
  const credentials = 'etcd rejected the agent credentials (ETCD_AGENT_ETCD_USERNAME / _PASSWORD_FILE)';
  it.each<[string, Error, string]>([
    ['GRPCUnavailableError', new GRPCUnavailableError('14 UNAVAILABLE: No connection established'), 'etcd is unreachable'],
    ['GRPCDeadlineExceededError', new GRPCDeadlineExceededError('4 DEADLINE_EXCEEDED: Deadline exceeded'), 'etcd did not answer in time'],
    [
      'EtcdAuthenticationFailedError',
      new EtcdAuthenticationFailedError('etcdserver: authentication failed, invalid user ID or password'),
      credentials,
    ],
    ['GRPCUnauthenticatedError', new GRPCUnauthenticatedError('16 UNAUTHENTICATED: bad credentials'), credentials],
    ['EtcdInvalidAuthTokenError', new EtcdInvalidAuthTokenError('etcdserver: invalid auth token'), credentials],
    [
      'EtcdPermissionDeniedError',
      new EtcdPermissionDeniedError('etcdserver: permission denied'),
      'etcd denied permission to the agent user: its membership lock and operation records need readwrite on ETCD_AGENT_KEY_PREFIX, membership changes the root role',
    ],
    ['BrokenCircuitError', new BrokenCircuitError(), 'etcd is unreachable (recent calls failed)'],
  ])('when etcd3 throws a %s, then it is unavailable and says why', (_name, thrown, message) => {
    const error = toAgentError(thrown);

    expect(error).toMatchObject({ code: 'unavailable', status: 503, retryable: true, message });
    expect(error.details).toEqual({ etcd: thrown.message });
    expect(error.cause).toBe(thrown);
  });

  it('when etcd3 throws a ClientClosedError, then it is unavailable, says the agent is shutting down, and is not retried inside', () => {
    const thrown = new ClientClosedError('cluster');
    const error = toAgentError(thrown);

    expect(error).toMatchObject({ code: 'unavailable', status: 503, retryable: true, message: 'the agent is shutting down' });
    expect(error.details).toEqual({ etcd: thrown.message, shutdown: true });
    expect(error.cause).toBe(thrown);
    expect(isTransient(error)).toBe(false);
  });

  it.each<[string, Error]>([
    ['GRPCInternalError', new GRPCInternalError('13 INTERNAL: stream reset')],
    ['GRPCCancelledError', new GRPCCancelledError('1 CANCELLED: Call cancelled')],
    ['a cast RESOURCE_EXHAUSTED', grpc(8, 'etcdserver: too many requests')],
    ['a cast FAILED_PRECONDITION etcd has no rule for', grpc(9, 'etcdserver: cluster version not supported')],
    // etcd3 makes an EtcdError of an etcdserver message that came without a gRPC code (e.g. a cancelled watch).
    ['an EtcdError', new EtcdError('etcdserver: too many requests')],
  ])("when etcd3 throws %s that no rule names, then it is unavailable with etcd's text", (_name, thrown) => {
    const error = toAgentError(thrown);

    expect(error).toMatchObject({ code: 'unavailable', status: 503, retryable: true, message: `etcd failed: ${thrown.message}` });
    expect(error.cause).toBe(thrown);
  });
});

describe('toAgentError: everything else', () => {
  it.each<[string, unknown]>([
    ['a TypeError', new TypeError("Cannot read properties of undefined (reading 'members')")],
    ['a plain Error', new Error('something unexpected')],
    ['a thrown string', 'boom'],
    ['undefined', undefined],
  ])('when %s is thrown, then it is internal (500, not retryable) and keeps the cause', (_name, thrown) => {
    const error = toAgentError(thrown);

    expect(error).toMatchObject({ code: 'internal', status: 500, retryable: false, message: 'internal error' });
    expect(error.details).toBeUndefined();
    expect(error.cause).toBe(thrown);
  });

  it.each<[ErrorCode]>([['busy'], ['timeout'], ['bad-request'], ['internal']])(
    'when an AgentError %s is thrown, then it passes through as the same object',
    (code) => {
      const thrown = new AgentError(code, 'already mapped', { details: { step: 'x' } });

      expect(toAgentError(thrown)).toBe(thrown);
    },
  );
});

describe('toAgentError: the NOSPACE alarm', () => {
  it('when etcd refuses a put as "database space exceeded", then the error names the alarm and how to reclaim space', () => {
    const error = toAgentError(grpc(8, 'etcdserver: mvcc: database space exceeded'));

    expect(error).toMatchObject({ code: 'unavailable', status: 503, retryable: true, details: { alarm: 'NOSPACE' } });
    expect(error.message).toMatch(/NOSPACE.*compact.*defrag.*alarm disarm/);
    expect(error.message).toContain('POST /v1/maintenance/defragment');
    expect(error.details?.remedy).toEqual(expect.arrayContaining([expect.stringContaining('/v1/maintenance/defragment')]));
  });
});

describe('predicates', () => {
  const notInSync = 'etcdserver: can only promote a learner member which is in sync with leader';
  const notLearner = 'etcdserver: can only promote a learner member';
  // [what, value, isTransient, etcdRefusal]
  it.each<[string, unknown, boolean, EtcdRefusal | undefined]>([
    ['a learner-not-in-sync refusal', grpc(9, notInSync), false, 'learner-not-ready'],
    ['a bare learner-not-in-sync message', new Error(notInSync), false, 'learner-not-ready'],
    ['a not-a-learner refusal', grpc(9, notLearner), false, 'not-learner'],
    ['a member-not-found refusal', grpc(5, 'etcdserver: member not found'), false, 'member-not-found'],
    ['a bare member-not-found message', new Error('etcdserver: member not found'), false, 'member-not-found'],
    ['a mapped member-not-found refusal', toAgentError(grpc(5, 'etcdserver: member not found')), false, 'member-not-found'],
    ['an unhealthy-cluster refusal', grpc(9, 'etcdserver: unhealthy cluster'), false, 'unhealthy-cluster'],
    ['a peer-URL-exists refusal', grpc(9, 'etcdserver: Peer URLs already exists'), false, 'peer-url-exists'],
    ['a too-many-learners refusal', grpc(9, 'etcdserver: too many learner members in cluster'), false, 'too-many-learners'],
    // etcd 3.4 and 3.5 refuse an RPC on a learner with gRPC 14, 3.6 and 3.7 with 9: transient either way.
    ['a learner refusal of etcd 3.4/3.5 (gRPC 14)', grpc(14, 'etcdserver: rpc not supported for learner'), true, 'learner-rpc'],
    ['a learner refusal of etcd 3.6/3.7 (gRPC 9)', grpc(9, 'etcdserver: rpc not supported for learner'), true, 'learner-rpc'],
    ['a mapped learner refusal of etcd 3.6/3.7', toAgentError(grpc(9, 'etcdserver: rpc not supported for learner')), true, 'learner-rpc'],
    ['an AgentError of the agent itself (no cause)', new AgentError('not-found', 'member not found'), false, undefined],
    ['GRPCUnavailableError', new GRPCUnavailableError('14 UNAVAILABLE: No connection established'), true, undefined],
    ['GRPCDeadlineExceededError', new GRPCDeadlineExceededError('4 DEADLINE_EXCEEDED: Deadline exceeded'), true, undefined],
    ['BrokenCircuitError', new BrokenCircuitError(), true, undefined],
    ['a cast leader-changed', grpc(14, 'etcdserver: leader changed'), true, 'leader-changed'],
    ['a bare leader-changed message', new Error('etcdserver: leader changed'), true, 'leader-changed'],
    ['a bare no-leader message', new Error('etcdserver: no leader'), true, 'no-leader'],
    ['a bare request-timed-out message', new Error('etcdserver: request timed out'), true, 'request-timed-out'],
    ['EtcdAuthenticationFailedError', new EtcdAuthenticationFailedError('etcdserver: authentication failed'), false, undefined],
    ['GRPCUnauthenticatedError', new GRPCUnauthenticatedError('16 UNAUTHENTICATED'), false, undefined],
    ['EtcdPermissionDeniedError', new EtcdPermissionDeniedError('etcdserver: permission denied'), false, undefined],
    ['an unavailable AgentError', new AgentError('unavailable', 'etcd is unreachable'), true, undefined],
    ['a mapped GRPCUnavailableError', toAgentError(new GRPCUnavailableError('14 UNAVAILABLE')), true, undefined],
    [
      'an unavailable AgentError caused by bad credentials',
      toAgentError(new EtcdAuthenticationFailedError('etcdserver: authentication failed')),
      false,
      undefined,
    ],
    ['an unavailable AgentError marked not retryable', new AgentError('unavailable', 'x', { retryable: false }), false, undefined],
    ['a NOSPACE refusal (mvcc: database space exceeded)', grpc(8, 'etcdserver: mvcc: database space exceeded'), false, 'nospace'],
    ['a mapped NOSPACE refusal', toAgentError(new Error('etcdserver: mvcc: database space exceeded')), false, 'nospace'],
    ['a repeated compaction', grpc(11, 'etcdserver: mvcc: required revision has been compacted'), false, 'compacted'],
    [
      'a compaction beyond the current revision',
      grpc(11, 'etcdserver: mvcc: required revision is a future revision'),
      false,
      'future-revision',
    ],
    ['a busy AgentError', new AgentError('busy', 'lock held'), false, undefined],
    ['a timeout AgentError', new AgentError('timeout', 'deadline'), false, undefined],
    ['a TypeError', new TypeError('x is not a function'), false, undefined],
    ['a thrown string naming a refusal', notInSync, false, undefined],
    ['null', null, false, undefined],
  ])('when the value is %s, then isTransient and etcdRefusal answer as the table says', (_what, value, transient, refusal) => {
    expect({ isTransient: isTransient(value), etcdRefusal: etcdRefusal(value) }).toEqual({ isTransient: transient, etcdRefusal: refusal });
  });
});

describe('failureLine', () => {
  const deadline = new GRPCDeadlineExceededError('4 DEADLINE_EXCEEDED: Deadline exceeded');
  it.each<[string, unknown, string]>([
    ['etcd3 gave up at the deadline', deadline, 'no answer within 150 ms'],
    ['the status call mapped that to an AgentError', toAgentError(deadline), 'no answer within 150 ms'],
    [
      'etcd is unreachable',
      new GRPCUnavailableError('14 UNAVAILABLE: No connection established'),
      'etcd is unreachable (14 UNAVAILABLE: No connection established)',
    ],
    ['etcd refused with its own words', grpc(14, 'etcdserver: no leader'), 'etcd has no leader (14 UNAVAILABLE: etcdserver: no leader)'],
    ['the agent refused (no etcd words)', new AgentError('busy', 'lock held'), 'lock held'],
  ])('when %s, then the line is %j', (_what, err, line) => {
    expect(failureLine(err, 150)).toBe(line);
  });
});
