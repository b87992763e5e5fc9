/**
 * What KubeBlocks' controller puts on the wire when it calls kbagent (its Go client,
 * apecloud/kubeblocks pkg/kbagent/client), rebuilt from the Go source, for tests that send those
 * exact bytes (the conformance test to the agent's kbagent route, the end-to-end test to the real
 * kbagent):
 * - `goActionRequestJson`: `json.Marshal(proto.ActionRequest)` (field order of the
 *   struct, `omitempty` fields absent, map keys sorted, HTML characters escaped);
 * - `goHttpRequest`: the request head Go's net/http client writes (Host, User-Agent,
 *   Content-Length, the request's headers sorted, then the transport's
 *   Accept-Encoding), and no Content-Type unless a header sets one.
 * kbagent's own side (rendering the HTTP actions' templates, sending them) is never rebuilt here:
 * the real kbagent does it in the end-to-end test.
 */

/** kbagent's proto.RetryPolicy; `retryInterval` is a Go time.Duration, nanoseconds on the wire. */
export interface GoRetryPolicy {
  maxRetries?: number;
  retryInterval?: number;
}

/** kbagent's proto.ActionRequest (Go zero values stand for "not set", as `omitempty` reads them). */
export interface GoActionRequest {
  action: string;
  parameters?: Record<string, string>;
  arguments?: string[][];
  /** A Go *int32: undefined is nil (absent); any number, 0 included, is sent. */
  timeoutSeconds?: number;
  retryPolicy?: GoRetryPolicy;
  rerun?: boolean;
}

/** Go's encoding/json string: HTML-safe escaping of <, >, & and U+2028/U+2029. */
function goString(value: string): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

function goMap(map: Record<string, string>): string {
  const keys = Object.keys(map).sort();
  return `{${keys.map((k) => `${goString(k)}:${goString(map[k])}`).join(',')}}`;
}

/**
 * The body kbagent's Go client sends. `extraFields` stand for fields a newer KubeBlocks adds to
 * the struct (appended after the known ones, marshalled as JSON values).
 */
export function goActionRequestJson(req: GoActionRequest, extraFields: Record<string, unknown> = {}): string {
  const parts = [`"action":${goString(req.action)}`];
  if (req.parameters !== undefined && Object.keys(req.parameters).length > 0) parts.push(`"parameters":${goMap(req.parameters)}`);
  if (req.arguments !== undefined && req.arguments.length > 0) {
    parts.push(`"arguments":[${req.arguments.map((a) => `[${a.map(goString).join(',')}]`).join(',')}]`);
  }
  if (req.timeoutSeconds !== undefined) parts.push(`"timeoutSeconds":${req.timeoutSeconds}`);
  if (req.retryPolicy !== undefined) {
    const policy: string[] = [];
    if (req.retryPolicy.maxRetries) policy.push(`"maxRetries":${req.retryPolicy.maxRetries}`);
    if (req.retryPolicy.retryInterval) policy.push(`"retryInterval":${req.retryPolicy.retryInterval}`);
    parts.push(`"retryPolicy":{${policy.join(',')}}`);
  }
  if (req.rerun === true) parts.push('"rerun":true');
  for (const [name, value] of Object.entries(extraFields)) parts.push(`${goString(name)}:${JSON.stringify(value)}`);
  return `{${parts.join(',')}}`;
}

/** Go's canonical header key: "content-type" → "Content-Type". */
function canonicalKey(name: string): string {
  return name
    .toLowerCase()
    .split('-')
    .map((w) => (w === '' ? w : w[0].toUpperCase() + w.slice(1)))
    .join('-');
}

/** The bytes Go's http.Client sends for `method path` to `host:port` with these headers and body. */
export function goHttpRequest(
  method: string,
  host: string,
  port: number,
  path: string,
  headers: Array<{ name: string; value: string }>,
  body: string,
): Buffer {
  const lines = [`${method} ${path} HTTP/1.1`, `Host: ${host}:${port}`, 'User-Agent: Go-http-client/1.1'];
  const bytes = Buffer.from(body, 'utf8');
  // An empty body is http.NoBody: no Content-Length on a GET, "Content-Length: 0" on a POST.
  if (bytes.length > 0 || method === 'POST' || method === 'PUT' || method === 'PATCH') lines.push(`Content-Length: ${bytes.length}`);
  const sorted = [...headers]
    .map((h) => ({ name: canonicalKey(h.name), value: h.value }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const h of sorted) lines.push(`${h.name}: ${h.value}`);
  lines.push('Accept-Encoding: gzip');
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), bytes]);
}
