/**
 * What kbagent puts on the wire, rebuilt from its Go source (apecloud/kubeblocks
 * pkg/kbagent), for conformance tests that send those exact bytes:
 * - `goActionRequestJson`: `json.Marshal(proto.ActionRequest)` (field order of the
 *   struct, `omitempty` fields absent, map keys sorted, HTML characters escaped);
 * - `goHttpRequest`: the request head Go's net/http client writes (Host, User-Agent,
 *   Content-Length, the request's headers sorted, then the transport's
 *   Accept-Encoding), and no Content-Type unless a header sets one;
 * - `renderGoTemplate`: the part of Go's text/template that the ComponentDefinition's
 *   HTTP action bodies use (`{{ .NAME }}` with missingkey=error, `{{ with index .
 *   "NAME" }}…{{ . }}…{{ end }}`, `{{-`/`-}}` trimming); anything else throws, so a
 *   body that strays beyond it fails its test instead of being rendered wrongly.
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
export function goHttpRequest(method: string, host: string, port: number, path: string, headers: Array<{ name: string; value: string }>, body: string): Buffer {
  const lines = [`${method} ${path} HTTP/1.1`, `Host: ${host}:${port}`, 'User-Agent: Go-http-client/1.1'];
  const bytes = Buffer.from(body, 'utf8');
  // An empty body is http.NoBody: no Content-Length on a GET, "Content-Length: 0" on a POST.
  if (bytes.length > 0 || method === 'POST' || method === 'PUT' || method === 'PATCH') lines.push(`Content-Length: ${bytes.length}`);
  const sorted = [...headers].map((h) => ({ name: canonicalKey(h.name), value: h.value })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const h of sorted) lines.push(`${h.name}: ${h.value}`);
  lines.push('Accept-Encoding: gzip');
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), bytes]);
}

type Node = { kind: 'text'; text: string } | { kind: 'field'; name: string } | { kind: 'dot' } | { kind: 'with'; name: string; body: Node[] };

/** Renders `template` over `data` as Go's text/template with Option("missingkey=error") would, for the subset above. */
export function renderGoTemplate(template: string, data: Record<string, string>): string {
  const tokens: Array<{ text?: string; action?: string }> = [];
  let at = 0;
  for (;;) {
    const open = template.indexOf('{{', at);
    if (open === -1) {
      tokens.push({ text: template.slice(at) });
      break;
    }
    const close = template.indexOf('}}', open);
    if (close === -1) throw new Error(`unclosed action at ${open}`);
    let text = template.slice(at, open);
    let action = template.slice(open + 2, close);
    // "{{- " trims the space before the action, " -}}" the space after it (Go: "-" then a space).
    if (/^- /.test(action)) {
      text = text.replace(/\s+$/, '');
      action = action.slice(1);
    }
    let trimAfter = false;
    if (/ -$/.test(action)) {
      trimAfter = true;
      action = action.slice(0, -1);
    }
    tokens.push({ text }, { action: action.trim() });
    at = close + 2;
    if (trimAfter) while (at < template.length && /\s/.test(template[at])) at++;
  }
  const stack: Node[][] = [[]];
  const withs: Array<{ name: string; body: Node[] }> = [];
  for (const token of tokens) {
    const current = stack[stack.length - 1];
    if (token.text !== undefined) {
      if (token.text !== '') current.push({ kind: 'text', text: token.text });
      continue;
    }
    const action = token.action as string;
    let match: RegExpExecArray | null;
    if ((match = /^\.([A-Za-z_][A-Za-z0-9_]*)$/.exec(action)) !== null) {
      current.push({ kind: 'field', name: match[1] });
    } else if (action === '.') {
      current.push({ kind: 'dot' });
    } else if ((match = /^with index \. "([A-Za-z_][A-Za-z0-9_]*)"$/.exec(action)) !== null) {
      const node = { kind: 'with' as const, name: match[1], body: [] as Node[] };
      current.push(node);
      withs.push(node);
      stack.push(node.body);
    } else if (action === 'end' && withs.length > 0) {
      withs.pop();
      stack.pop();
    } else {
      throw new Error(`template action {{ ${action} }} is outside the subset this renderer knows`);
    }
  }
  if (withs.length > 0) throw new Error('unclosed {{ with }}');
  const render = (nodes: Node[], dot: string | undefined): string =>
    nodes
      .map((node) => {
        switch (node.kind) {
          case 'text':
            return node.text;
          case 'dot':
            if (dot === undefined) throw new Error('{{ . }} outside {{ with }} would print the whole map');
            return dot;
          case 'field':
            if (dot !== undefined) throw new Error(`{{ .${node.name} }} inside {{ with }} reads a field of a string`);
            if (!(node.name in data)) throw new Error(`map has no entry for key "${node.name}"`);
            return data[node.name];
          case 'with': {
            const value = data[node.name];
            return value === undefined || value === '' ? '' : render(node.body, value);
          }
        }
      })
      .join('');
  return render(stack[0], undefined);
}
