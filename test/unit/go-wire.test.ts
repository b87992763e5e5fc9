import { goActionRequestJson, goHttpRequest } from '../helpers/go-wire';

describe("the Go wire helpers: what KubeBlocks' Go client sends", () => {
  it.each<[string, Parameters<typeof goActionRequestJson>[0], Record<string, unknown>, string]>([
    ['a bare roleProbe', { action: 'roleProbe' }, {}, '{"action":"roleProbe"}'],
    ['empty parameters (omitempty)', { action: 'roleProbe', parameters: {}, arguments: [] }, {}, '{"action":"roleProbe"}'],
    [
      'a *int32 timeout of 0 (a non-nil pointer is sent)',
      { action: 'roleProbe', timeoutSeconds: 0 },
      {},
      '{"action":"roleProbe","timeoutSeconds":0}',
    ],
    [
      'sorted parameters, a retry policy in nanoseconds, rerun',
      {
        action: 'memberJoin',
        parameters: { KB_JOIN_MEMBER_POD_NAME: 'etcd-3', KB_JOIN_MEMBER_POD_FQDN: 'etcd-3.x' },
        timeoutSeconds: 30,
        retryPolicy: { maxRetries: 3, retryInterval: 5e9 },
        rerun: true,
      },
      {},
      '{"action":"memberJoin","parameters":{"KB_JOIN_MEMBER_POD_FQDN":"etcd-3.x","KB_JOIN_MEMBER_POD_NAME":"etcd-3"},"timeoutSeconds":30,"retryPolicy":{"maxRetries":3,"retryInterval":5000000000},"rerun":true}',
    ],
    ['HTML characters, as Go escapes them', { action: 'a<b>&c' }, {}, '{"action":"a\\u003cb\\u003e\\u0026c"}'],
    ['a field of a newer KubeBlocks', { action: 'roleProbe' }, { priority: 2 }, '{"action":"roleProbe","priority":2}'],
  ])("when kbagent marshals %s, then the body is byte for byte Go's", (_what, req, extra, json) => {
    expect(goActionRequestJson(req, extra)).toBe(json);
  });

  it("when a POST is written, then the head is Go's: Host, User-Agent, Content-Length, sorted headers, Accept-Encoding", () => {
    const bytes = goHttpRequest(
      'POST',
      '127.0.0.1',
      3501,
      '/v1.0/action',
      [
        { name: 'x-b', value: '2' },
        { name: 'content-type', value: 'application/json' },
      ],
      '{}',
    );

    expect(bytes.toString()).toBe(
      'POST /v1.0/action HTTP/1.1\r\nHost: 127.0.0.1:3501\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 2\r\nContent-Type: application/json\r\nX-B: 2\r\nAccept-Encoding: gzip\r\n\r\n{}',
    );
    expect(goHttpRequest('GET', 'h', 1, '/v1/role', [], '').toString()).toBe(
      'GET /v1/role HTTP/1.1\r\nHost: h:1\r\nUser-Agent: Go-http-client/1.1\r\nAccept-Encoding: gzip\r\n\r\n',
    );
  });
});
