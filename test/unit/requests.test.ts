import { AgentError } from '../../agent/proto/errors';
import {
  defragmentRequestSchema,
  joinRequestSchema,
  leaveRequestSchema,
  parseRequest,
  promoteRequestSchema,
  transferRequestSchema,
} from '../../agent/proto/requests';

const URL3 = 'http://etcd-3.etcd-headless:2380';

function refusal(schema: Parameters<typeof parseRequest>[0], body: unknown): AgentError {
  try {
    parseRequest(schema, body);
  } catch (err) {
    if (err instanceof AgentError) return err;
    throw err;
  }
  throw new Error(`accepted ${JSON.stringify(body)}`);
}

describe('join bodies', () => {
  it.each<[string, object]>([
    ['a name alone', { name: 'etcd-3' }],
    ['every field', { name: 'etcd-3', peerURLs: [URL3], learner: false, wait: true, timeoutSeconds: 60 }],
    ['an https peer URL on an IPv6 host', { name: 'etcd-3', peerURLs: ['https://[fd00::3]:2380'] }],
    ['a dotted name', { name: 'etcd-3.etcd-headless', timeoutSeconds: 1 }],
    ['a trailing slash', { name: 'etcd-3', peerURLs: [`${URL3}/`] }],
  ])('when a join carries %s, then it is accepted as sent', (_what, body) => {
    expect(parseRequest(joinRequestSchema, body)).toEqual(body);
  });

  it.each<[string, unknown, string, RegExp]>([
    ['no name', {}, 'name', /Required/],
    ['an upper-case name', { name: 'Etcd-3' }, 'name', /DNS-1123/],
    ['a name of 254 characters', { name: 'a'.repeat(254) }, 'name', /DNS-1123/],
    ['a name that is a number', { name: 3 }, 'name', /string/],
    ['an unknown field', { name: 'etcd-3', lerner: true }, '', /lerner/],
    ['an empty peer URL list', { name: 'etcd-3', peerURLs: [] }, 'peerURLs', /at least one/],
    ['a peer URL without a port', { name: 'etcd-3', peerURLs: ['http://etcd-3'] }, 'peerURLs.0', /port/],
    ['a peer URL with a path', { name: 'etcd-3', peerURLs: [`${URL3}/x`] }, 'peerURLs.0', /path/],
    ['a peer URL with a user', { name: 'etcd-3', peerURLs: ['http://u@etcd-3:2380'] }, 'peerURLs.0', /user/],
    ['a peer URL with a query', { name: 'etcd-3', peerURLs: [`${URL3}?a=1`] }, 'peerURLs.0', /query/],
    ['a unix peer URL', { name: 'etcd-3', peerURLs: ['unix://etcd-3:2380'] }, 'peerURLs.0', /http or https/],
    ['a second peer URL that is bad', { name: 'etcd-3', peerURLs: [URL3, 'etcd-3:2380'] }, 'peerURLs.1', /peer URL/],
    ['learner as a string', { name: 'etcd-3', learner: 'true' }, 'learner', /boolean/],
    ['timeoutSeconds 0', { name: 'etcd-3', timeoutSeconds: 0 }, 'timeoutSeconds', /1/],
    ['timeoutSeconds 61', { name: 'etcd-3', timeoutSeconds: 61 }, 'timeoutSeconds', /60/],
    ['timeoutSeconds 1.5', { name: 'etcd-3', timeoutSeconds: 1.5 }, 'timeoutSeconds', /whole/],
    ['not an object', 'etcd-3', '', /object/],
  ])('when a join carries %s, then 400 bad-request names %s', (_what, body, path, message) => {
    const err = refusal(joinRequestSchema, body);

    expect(err.code).toBe('bad-request');
    expect(err.status).toBe(400);
    expect(err.retryable).toBe(false);
    expect(err.message).toMatch(message);
    expect(err.message.startsWith(path === '' ? '' : `${path}: `)).toBe(true);
    expect(err.details).toEqual({ issues: expect.arrayContaining([{ path, message: expect.stringMatching(message) }]) });
  });

  it('when a body has several problems, then details lists every one', () => {
    const err = refusal(joinRequestSchema, { name: 'X', wait: 1, extra: true });

    expect((err.details?.issues as Array<{ path: string }>).map((i) => i.path).sort()).toEqual(['', 'name', 'wait']);
  });
});

describe('leave, promote and transfer bodies', () => {
  it.each<[string, Parameters<typeof parseRequest>[0], object]>([
    ['a leave by name', leaveRequestSchema, { name: 'etcd-1' }],
    ['a leave by name and peer URL, forced', leaveRequestSchema, { name: 'etcd-1', peerURLs: [URL3], force: true, timeoutSeconds: 5 }],
    ['a leave by id', leaveRequestSchema, { id: '628170c800dbcee' }],
    ['a leave by 0x id', leaveRequestSchema, { id: '0x628170C800DBCEE' }],
    ['a promote by name', promoteRequestSchema, { name: 'etcd-3' }],
    ['a promote with id and peer URLs', promoteRequestSchema, { name: 'etcd-3', id: 'a1', peerURLs: [URL3] }],
    ['a transfer to a member', transferRequestSchema, { to: 'etcd-1', timeoutSeconds: 10 }],
    ['a transfer away from this pod', transferRequestSchema, {}],
  ])('when %s is sent, then it is accepted', (_what, schema, body) => {
    expect(parseRequest(schema, body)).toEqual(body);
  });

  it.each<[string, Parameters<typeof parseRequest>[0], unknown, RegExp]>([
    ['a leave naming nothing', leaveRequestSchema, {}, /name or id/],
    ['a leave by peer URL alone', leaveRequestSchema, { peerURLs: [URL3] }, /name or id/],
    ['a leave with force as a string', leaveRequestSchema, { name: 'etcd-1', force: 'yes' }, /boolean/],
    ['a leave by an id that is not hex', leaveRequestSchema, { id: 'etcd-1' }, /hex/],
    ['a leave by an id of 17 digits', leaveRequestSchema, { id: '1'.repeat(17) }, /hex/],
    ['a leave with an unknown field', leaveRequestSchema, { name: 'etcd-1', froce: true }, /froce/],
    ['a promote without a name', promoteRequestSchema, { id: 'a1' }, /Required/],
    ['a promote with wait', promoteRequestSchema, { name: 'etcd-3', wait: true }, /wait/],
    ['a transfer to a bad name', transferRequestSchema, { to: 'etcd_1' }, /DNS-1123/],
    ['a transfer with force', transferRequestSchema, { force: true }, /force/],
  ])('when %s is sent, then 400 bad-request', (_what, schema, body, message) => {
    const err = refusal(schema, body);

    expect(err.code).toBe('bad-request');
    expect(err.message).toMatch(message);
  });
});

describe('defragment bodies', () => {
  it.each<[string, object]>([
    ['nothing (the settings decide)', {}],
    ['every field', { minFragmentation: 0.3, minDbSizeBytes: 0, compact: { retainRevisions: 1000 }, force: true, timeoutSeconds: 60 }],
    ['a retention as a duration', { compact: { retainSeconds: 3600 } }],
    ['no compaction', { compact: false }],
  ])('when a defragment carries %s, then it is accepted as sent', (_what, body) => {
    expect(parseRequest(defragmentRequestSchema, body)).toEqual(body);
  });

  it.each<[string, unknown, string]>([
    ['a fragmentation of 0', { minFragmentation: 0 }, 'minFragmentation'],
    ['a fragmentation above 1', { minFragmentation: 1.5 }, 'minFragmentation'],
    ['a negative size', { minDbSizeBytes: -1 }, 'minDbSizeBytes'],
    ['a size beyond 2^53', { minDbSizeBytes: 2 ** 53 }, 'minDbSizeBytes'],
    ['both retentions', { compact: { retainRevisions: 1, retainSeconds: 1 } }, 'compact'],
    ['a retention of 0', { compact: { retainRevisions: 0 } }, 'compact.retainRevisions'],
    ['compact: true', { compact: true }, 'compact'],
    ['an unknown field', { minFragmentaton: 0.3 }, ''],
  ])('when a defragment carries %s (%j), then it is a bad-request naming "%s"', (_what, body, path) => {
    const error = refusal(defragmentRequestSchema, body);
    expect(error.code).toBe('bad-request');
    expect((error.details?.issues as Array<{ path: string }>)[0].path).toBe(path);
  });
});
