import { ERROR_CODES, ErrorCode } from '../../agent/proto/errors';
import { effectiveTimeout, encodeOutput, kbAgentErrorType, kbAgentRequestSchema, unknownFields } from '../../agent/proto/kbagent';

describe('kbagent wire format (docs/api.md §5)', () => {
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
    [{ action: 'roleProbe', extra: 1, newKubeBlocksField: { a: [1] } }],
    [{ action: 'memberJoin', timeoutSeconds: 0 }],
    [{ action: 'memberJoin', timeoutSeconds: -1 }],
    [{ action: 'memberJoin', timeoutSeconds: 120 }],
    [{ action: 'memberJoin', timeoutSeconds: null, parameters: null }],
    [{ action: 'memberJoin', arguments: [['a', 'b']], retryPolicy: { maxRetries: 3, retryInterval: 5_000_000_000 } }],
  ])('when the body is %j, then it is accepted', (body) => {
    expect(kbAgentRequestSchema.safeParse(body).success).toBe(true);
  });

  it.each([
    [{}],
    [{ action: '' }],
    [{ action: 'memberJoin', parameters: { KB_JOIN_MEMBER_POD_NAME: 3 } }],
    [{ action: 'memberJoin', timeoutSeconds: '30' }],
    [{ action: 'memberJoin', timeoutSeconds: 1.5 }],
  ])('when the body is %j, then it is refused', (body) => {
    expect(kbAgentRequestSchema.safeParse(body).success).toBe(false);
  });

  it('when the body carries fields kbagent does not send, then they are dropped from the request and named for the log', () => {
    const body = { action: 'roleProbe', extra: 1, rerun: false };

    expect(kbAgentRequestSchema.parse(body)).toEqual({ action: 'roleProbe', rerun: false });
    expect(unknownFields(body)).toEqual(['extra']);
    expect(unknownFields({ action: 'roleProbe', timeoutSeconds: 3 })).toEqual([]);
  });

  it.each<[number | null | undefined, number, string | undefined]>([
    [undefined, 30, undefined],
    [null, 30, undefined],
    [0, 30, undefined],
    [-1, 30, 'negative'],
    [-3600, 30, 'negative'],
    [1, 1, undefined],
    [45, 45, undefined],
    [60, 60, undefined],
    [61, 60, 'capped'],
    [120, 60, 'capped'],
  ])('when timeoutSeconds is %p and the default is 30, then the call gets %d s (note: %p)', (requested, seconds, note) => {
    const timeout = effectiveTimeout(requested, 30);

    expect(timeout.seconds).toBe(seconds);
    if (note === undefined) expect(timeout.note).toBeUndefined();
    else expect(timeout.note).toContain(note);
  });

  it('when an output is encoded, then it is base64 of the text, or of the JSON of an object', () => {
    expect(Buffer.from(encodeOutput('leader'), 'base64').toString()).toBe('leader');
    expect(JSON.parse(Buffer.from(encodeOutput({ a: 1 }), 'base64').toString())).toEqual({ a: 1 });
  });
});
