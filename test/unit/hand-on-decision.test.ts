import { decideHandOn, readHandedOnAnswer, type HandOnFacts } from '../../agent/maintenance/hand-on-decision';

const runner = { name: 'etcd-1', peerURLs: ['http://etcd-1.etcd-headless.demo.svc.cluster.local:2380'] };
const facts = (over: Partial<HandOnFacts> = {}): HandOnFacts => ({ runner, port: 3501, tls: false, ...over });
const ROUTE = '/v1/maintenance/defragment';

describe('decideHandOn', () => {
  it.each<[string, string, HandOnFacts]>([
    ["a caller's call, the runner has a peer URL", `hand-on http://etcd-1.etcd-headless.demo.svc.cluster.local:3501${ROUTE}`, facts()],
    ['this agent serves HTTPS', `hand-on https://etcd-1.etcd-headless.demo.svc.cluster.local:3501${ROUTE}`, facts({ tls: true })],
    [
      'an IPv6 peer URL',
      `hand-on http://[fd00::1]:3501${ROUTE}`,
      facts({ runner: { name: 'etcd-1', peerURLs: ['http://[fd00::1]:2380'] } }),
    ],
    [
      'the runner has several peer URLs',
      `hand-on http://10.0.0.1:3501${ROUTE}`,
      facts({ runner: { name: 'etcd-1', peerURLs: ['http://10.0.0.1:2380', 'http://10.0.0.2:2380'] } }),
    ],
    ['the call was handed on already', 'answer-here handed on already (by etcd-2)', facts({ handedOnBy: 'etcd-2' })],
    ['the call was handed on already, the header empty', 'answer-here handed on already (by an agent)', facts({ handedOnBy: '' })],
    ['no voter is started', 'answer-here no voter is started', facts({ runner: undefined })],
    ['the runner has no peer URL', 'answer-here etcd-1 has no peer URL', facts({ runner: { name: 'etcd-1', peerURLs: [] } })],
    ["the runner's peer URL is not a URL", 'answer-here is not a URL', facts({ runner: { name: 'etcd-1', peerURLs: ['not a url'] } })],
    ["this agent's port was chosen at its start", "answer-here the other agents' port is unknown", facts({ port: 0 })],
  ])('when %s, then %s', (_case, expected, f) => {
    const decision = decideHandOn(f);
    const [kind, ...rest] = expected.split(' ');
    expect(decision.kind).toBe(kind);
    if (decision.kind === 'hand-on') expect(decision).toEqual({ kind, url: rest.join(' '), runner: 'etcd-1' });
    else expect(decision.why).toContain(rest.join(' '));
  });
});

describe('readHandedOnAnswer', () => {
  const result = (outcome: string, complete: boolean): string =>
    JSON.stringify({ requestId: 'r', action: 'defragment', outcome, complete });
  const error = (code: string, message = 'why'): string => JSON.stringify({ requestId: 'r', error: { code, message, retryable: true } });

  it.each<[string, string, number, string]>([
    ['the run ended there', 'relay 200 defragmented', 200, result('defragmented', true)],
    ['nothing was to do', 'relay 200 nothing-to-do', 200, result('nothing-to-do', true)],
    ['the run goes on there', 'relay 202 in-progress', 202, result('in-progress', false)],
    ['it refused the cluster as unhealthy', 'relay 409 unsafe', 409, error('unsafe')],
    ['a membership change held the lock before the alarm', 'relay 409 busy', 409, error('busy')],
    ['the data fills the quota', 'relay 503 unavailable', 503, error('unavailable')],
    ['it failed', 'relay 500 internal', 500, error('internal')],
    [
      'it wants a token this agent lacks',
      'not-handed-on HTTP 401 unauthorized',
      401,
      error('unauthorized', 'a valid bearer token is required'),
    ],
    ['it takes mutating calls from loopback only', 'not-handed-on ETCD_AGENT_TOKEN_FILE', 403, error('forbidden')],
    ["its port serves prepare's answer", `not-handed-on does not serve POST ${ROUTE} (HTTP 404`, 404, error('not-found')],
    ['the body is not JSON', 'not-handed-on HTTP 502, not with JSON', 502, '<html>bad gateway</html>'],
    ['the body is a JSON array', 'not-handed-on not with JSON', 200, '[]'],
    ['the body is neither a result nor an error', 'not-handed-on neither a result nor an error', 200, '{"hello":1}'],
  ])('when %s, then %s', (_case, expected, status, text) => {
    const answer = readHandedOnAnswer('etcd-1', status, text);
    const [kind, ...rest] = expected.split(' ');
    expect(answer.kind).toBe(kind);
    if (answer.kind === 'relay') {
      expect(`${answer.status} ${answer.outcome}`).toBe(rest.join(' '));
      // As it came: the body is not rewritten.
      expect(answer.text).toBe(text);
    } else {
      expect(answer.why).toContain(rest.join(' '));
    }
  });
});
