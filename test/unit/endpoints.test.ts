import { castGrpcError, GRPCUnavailableError } from 'etcd3';
import type { Etcd3 } from 'etcd3';
import { EndpointSet, isWrongEndpoint } from '../../agent/etcd/endpoints';
import { parsePeerMembers } from '../../agent/etcd/peer-members';
import { AgentError } from '../../agent/proto/errors';

const unreachable = new GRPCUnavailableError('14 UNAVAILABLE: connect ECONNREFUSED');
const learner = new Error('etcdserver: rpc not supported for learner');
/** A learner's refusal as etcd3 hands it over: grpc-js's error with the code the etcd version sent, cast by etcd3. */
const learnerWithCode = (code: 9 | 14): Error =>
  castGrpcError(
    Object.assign(new Error(`${code} ${code === 9 ? 'FAILED_PRECONDITION' : 'UNAVAILABLE'}: etcdserver: rpc not supported for learner`), {
      code,
    }),
  );

describe('EndpointSet order', () => {
  // Clients are never built here: only the order is looked at.
  const set = (): EndpointSet => new EndpointSet(['http://own:2379'], () => ({}) as Etcd3);

  it.each<[string, (s: EndpointSet) => void, string[]]>([
    ['nothing is known yet', () => undefined, ['http://own:2379']],
    [
      'the member list reported two voters',
      (s) => s.setReported(['http://a:2379', 'http://own:2379']),
      ['http://own:2379', 'http://a:2379'],
    ],
    [
      'another endpoint answered last',
      (s) => {
        s.setReported(['http://a:2379', 'http://b:2379']);
        s.succeeded('http://b:2379');
      },
      ['http://b:2379', 'http://own:2379', 'http://a:2379'],
    ],
    [
      'the configured endpoint (its own member) is dead',
      (s) => {
        s.setReported(['http://a:2379', 'http://b:2379']);
        s.failed('http://own:2379', unreachable);
      },
      ['http://a:2379', 'http://b:2379', 'http://own:2379'],
    ],
    [
      'the configured endpoint is a learner',
      (s) => {
        s.setReported(['http://a:2379']);
        s.failed('http://own:2379', learner);
      },
      ['http://a:2379', 'http://own:2379'],
    ],
    [
      'the endpoint that answered last then failed',
      (s) => {
        s.setReported(['http://a:2379', 'http://b:2379']);
        s.succeeded('http://a:2379');
        s.failed('http://a:2379', unreachable);
      },
      ['http://own:2379', 'http://b:2379', 'http://a:2379'],
    ],
    [
      'an endpoint refused for a reason any endpoint would give (not skipped)',
      (s) => {
        s.setReported(['http://a:2379']);
        s.failed('http://own:2379', new Error('etcdserver: member not found'));
      },
      ['http://own:2379', 'http://a:2379'],
    ],
  ])('when %s, then the order is %j', (_what, act, order) => {
    const s = set();
    act(s);

    expect(s.ordered()).toEqual(order);
  });

  it('when a failed endpoint was skipped for a second, then it takes its place again', () => {
    const s = set();
    s.setReported(['http://a:2379']);
    s.failed('http://own:2379', unreachable);

    expect(s.ordered(Date.now() + 1001)).toEqual(['http://own:2379', 'http://a:2379']);
  });

  it.each<[string, unknown, boolean]>([
    ['unreachable', unreachable, true],
    ['a learner', learner, true],
    ['a learner of etcd 3.4 or 3.5 (gRPC 14, Unavailable)', learnerWithCode(14), true],
    ['a learner of etcd 3.6 or 3.7 (gRPC 9, FailedPrecondition)', learnerWithCode(9), true],
    [
      'a mapped learner refusal of etcd 3.6',
      new AgentError('unavailable', 'the member asked is a learner', { cause: learnerWithCode(9) }),
      true,
    ],
    [
      'another FailedPrecondition (too many learners: every member says so)',
      castGrpcError(Object.assign(new Error('9 FAILED_PRECONDITION: etcdserver: too many learner members in cluster'), { code: 9 })),
      false,
    ],
    ['a mapped learner refusal', new AgentError('unavailable', 'the member asked is a learner', { cause: learner }), true],
    ['member not found', new Error('etcdserver: member not found'), false],
    ['a busy AgentError', new AgentError('busy', 'lock held'), false],
  ])('when an endpoint fails as %s, then another may serve the call: %s', (_what, err, wrong) => {
    expect(isWrongEndpoint(err)).toBe(wrong);
  });
});

describe('parsePeerMembers', () => {
  it('when ids are bare uint64 numbers above 2^53, then they are read exactly, as hex', () => {
    const text =
      '[{"id":11971978914278855662,"peerURLs":["http://127.0.0.1:23802"],"isLearner":true,"name":"b","clientURLs":["http://127.0.0.1:23792"]},' +
      '{"id":13668033151171901709,"peerURLs":["http://127.0.0.1:23801"],"name":"a","clientURLs":["http://127.0.0.1:23791"]},' +
      '{"id":1,"peerURLs":["http://127.0.0.1:23803"],"name":"","clientURLs":null}]';

    expect(parsePeerMembers(text)).toEqual([
      {
        id: 'a62503646c0ed3ee',
        name: 'b',
        peerURLs: ['http://127.0.0.1:23802'],
        clientURLs: ['http://127.0.0.1:23792'],
        isLearner: true,
        started: true,
      },
      {
        id: 'bdae9bbc11dd390d',
        name: 'a',
        peerURLs: ['http://127.0.0.1:23801'],
        clientURLs: ['http://127.0.0.1:23791'],
        isLearner: false,
        started: true,
      },
      { id: '1', name: '', peerURLs: ['http://127.0.0.1:23803'], clientURLs: [], isLearner: false, started: false },
    ]);
  });

  it.each<[string, string]>([
    ['not an array', '{"members":[]}'],
    ['an id that is not a number', '[{"id":"x","name":"a"}]'],
    ['not JSON', '404 page not found'],
  ])('when the answer is %s, then it throws', (_what, text) => {
    expect(() => parsePeerMembers(text)).toThrow();
  });
});
