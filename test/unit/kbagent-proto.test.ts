import { ERROR_CODES, ErrorCode } from '../../agent/proto/errors';
import { encodeOutput, kbAgentErrorType, kbAgentRequestSchema } from '../../agent/proto/kbagent';

describe('kbagent wire format (CONTRACT §5)', () => {
  it.each([
    ['busy', 'busy'],
    ['unsafe', 'preconditionFailed'],
    ['bad-request', 'badRequest'],
    ['timeout', 'timedOut'],
    ['conflict', 'failed'],
    ['unavailable', 'failed'],
    ['not-found', 'failed'],
    ['internal', 'internalError'],
  ] as const)('when the agent fails with %s, then kbagent sees %s', (code, type) => {
    expect(kbAgentErrorType(code)).toBe(type);
  });

  it('when any contract error code is mapped, then it has a kbagent error type', () => {
    for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) expect(typeof kbAgentErrorType(code)).toBe('string');
  });

  it.each([
    [{ action: 'memberJoin', parameters: { KB_JOIN_MEMBER_POD_NAME: 'etcd-3' }, timeoutSeconds: 30 }],
    [{ action: 'roleProbe' }],
    [{ action: 'memberLeave', parameters: {}, arguments: ['x'], retryPolicy: { maxRetries: 3 }, rerun: true, nonBlocking: false }],
  ])('when the body is %j, then it is accepted', (body) => {
    expect(kbAgentRequestSchema.safeParse(body).success).toBe(true);
  });

  it.each([
    [{}],
    [{ action: '' }],
    [{ action: 'roleProbe', extra: 1 }],
    [{ action: 'memberJoin', parameters: { KB_JOIN_MEMBER_POD_NAME: 3 } }],
    [{ action: 'memberJoin', timeoutSeconds: 0 }],
    [{ action: 'memberJoin', timeoutSeconds: 61 }],
    [{ action: 'memberJoin', timeoutSeconds: '30' }],
  ])('when the body is %j, then it is refused', (body) => {
    expect(kbAgentRequestSchema.safeParse(body).success).toBe(false);
  });

  it('when an output is encoded, then it is base64 of the text, or of the JSON of an object', () => {
    expect(Buffer.from(encodeOutput('leader'), 'base64').toString()).toBe('leader');
    expect(JSON.parse(Buffer.from(encodeOutput({ a: 1 }), 'base64').toString())).toEqual({ a: 1 });
  });
});
