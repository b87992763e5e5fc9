/**
 * deploy/kubeblocks-componentdefinition.yaml against the ComponentDefinition CRD of every KubeBlocks
 * release line (test/fixtures/kubeblocks, see its NOTICE), strict: unknown fields are errors. The one
 * file must install on each of them, so a field only newer releases know fails here.
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { componentDefinitionErrors, RELEASES } from '../helpers/kubeblocks-releases';

const ROOT = path.join(__dirname, '..', '..');
const CMPD = path.join(ROOT, 'deploy/kubeblocks-componentdefinition.yaml');

// The document is looked into field by field.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = any;

const text = fs.readFileSync(CMPD, 'utf8');
const load = (): Doc => YAML.parse(text);
const TAGS = RELEASES.map((r) => r.tag);
const MEMBERSHIP_ACTIONS = ['memberJoin', 'memberLeave', 'roleProbe', 'switchover', 'availableProbe'];
/** The parameters KubeBlocks sends with each action (pkg/controller/lifecycle/lfa_member.go). */
const PARAMETERS: Record<string, string[]> = {
  memberJoin: ['KB_JOIN_MEMBER_POD_NAME', 'KB_JOIN_MEMBER_POD_FQDN'],
  memberLeave: ['KB_LEAVE_MEMBER_POD_NAME', 'KB_LEAVE_MEMBER_POD_FQDN'],
  switchover: ['KB_SWITCHOVER_CURRENT_NAME', 'KB_SWITCHOVER_CURRENT_FQDN', 'KB_SWITCHOVER_ROLE'],
};

describe('the KubeBlocks ComponentDefinition (deploy/kubeblocks-componentdefinition.yaml)', () => {
  it.each(TAGS)('when validated strictly against the apps.kubeblocks.io/v1 CRD of KubeBlocks %s, then it has no error', (tag) => {
    expect(componentDefinitionErrors(tag, load())).toEqual([]);
  });

  it.each<[string, (doc: Doc) => void, RegExp]>([
    [
      'an unknown field in an HTTP action',
      (d) => (d.spec.lifecycleActions.memberJoin.http.url = 'http://x'),
      /memberJoin\/http must NOT have additional properties \(url\)/,
    ],
    [
      'an exec action on a container spec field',
      (d) => (d.spec.runtime.containers[1].exec = {}),
      /containers\/1 must NOT have additional properties \(exec\)/,
    ],
    [
      'a retry count as a string',
      (d) => (d.spec.lifecycleActions.memberJoin.retryPolicy = { maxRetries: 'ten' }),
      /maxRetries must be integer/,
    ],
    [
      'an HTTP method the CRD does not allow',
      (d) => (d.spec.lifecycleActions.memberJoin.http.method = 'OPTIONS'),
      /method must be equal to one of the allowed values/,
    ],
    ['a role without a name', (d) => delete d.spec.roles[0].name, /roles\/0 must have required property 'name'/],
    [
      'an availability condition the CRD does not know',
      (d) => (d.spec.available.withProbe.condition.most = { succeed: true }),
      /condition must NOT have additional properties \(most\)/,
    ],
  ])('when the definition has %s, then every release refuses it (the check can fail)', (_what, spoil, error) => {
    const doc = load();
    spoil(doc);

    for (const tag of TAGS) expect(componentDefinitionErrors(tag, doc).join('\n')).toMatch(error);
  });

  it.each<[string, (doc: Doc) => void, string[]]>([
    [
      'retryPolicy.retryIntervalSeconds (from v1.0.3-beta.10)',
      (d) => (d.spec.lifecycleActions.memberJoin.retryPolicy = { maxRetries: 3, retryIntervalSeconds: 5 }),
      ['v1.0.2'],
    ],
    ['roles[].isExclusive (from v1.0.3)', (d) => (d.spec.roles[0].isExclusive = true), ['v1.0.2']],
    [
      'lifecycleActions.*.nonBlocking (from v1.2)',
      (d) => (d.spec.lifecycleActions.memberJoin.nonBlocking = false),
      ['v1.0.2', 'v1.0.3-beta.11', 'v1.1.0-beta.9'],
    ],
  ])('when the definition used %s, then the releases without it refuse it: why the file leaves it out', (_what, add, refusing) => {
    const doc = load();
    add(doc);

    expect(TAGS.filter((tag) => componentDefinitionErrors(tag, doc).length > 0)).toEqual(refusing);
  });

  it('when its membership actions and probes are read, then each is an HTTP action to the sidecar on 127.0.0.1:3501, and none runs an image of its own', () => {
    const actions = load().spec.lifecycleActions;

    for (const name of MEMBERSHIP_ACTIONS) {
      expect(actions[name].exec).toBeUndefined();
      expect(actions[name].http).toMatchObject({ port: '3501' });
      expect(actions[name].http.host ?? '127.0.0.1').toBe('127.0.0.1');
    }
    for (const action of Object.values(actions) as Doc[]) expect(action.exec?.image).toBeUndefined();
    expect(actions.roleProbe.http).toMatchObject({ method: 'GET', path: '/v1/role' });
    expect(actions.availableProbe.http).toMatchObject({ method: 'GET', path: '/v1/available' });
  });

  it("when the mutating actions are read, then they require the end state, leave retrying to the controller, and the agent's deadline ends inside kbagent's", () => {
    const actions = load().spec.lifecycleActions;

    for (const name of ['memberJoin', 'memberLeave', 'switchover']) {
      expect(actions[name].http.method).toBe('POST');
      expect(actions[name].http.body).toContain('"requireComplete": true');
      expect(actions[name].http.headers).toContainEqual({ name: 'Content-Type', value: 'application/json' });
      // kbagent v1.0.x and v1.1 ignore a retryPolicy; from v1.2.0-alpha.3 it would retry inside one call.
      expect(actions[name].retryPolicy).toBeUndefined();
      const bodyTimeout = Number(/"timeoutSeconds": (\d+)/.exec(actions[name].http.body)?.[1]);
      expect(bodyTimeout).toBeGreaterThan(0);
      // At least 5 s for the answer to come back through kbagent (it connects within 5 s).
      expect(actions[name].timeoutSeconds - bodyTimeout).toBeGreaterThanOrEqual(5);
      expect(actions[name].timeoutSeconds).toBeLessThanOrEqual(60);
    }
  });

  it('when the HTTP bodies are read, then they name only parameters KubeBlocks sends and vars the definition declares (kbagent renders with missingkey=error)', () => {
    const doc = load();
    const vars = new Set<string>(doc.spec.vars.map((v: Doc) => v.name));

    for (const [name, parameters] of Object.entries(PARAMETERS)) {
      const body: string = doc.spec.lifecycleActions[name].http.body;
      // `.NAME` must be there; `index . "NAME"` may be absent (KB_SWITCHOVER_CANDIDATE_NAME without a candidate).
      const direct = [...body.matchAll(/\{\{-?\s*\.([A-Za-z_][A-Za-z0-9_]*)\s*-?\}\}/g)].map((m) => m[1]);
      const optional = [...body.matchAll(/index \. "([A-Za-z_][A-Za-z0-9_]*)"/g)].map((m) => m[1]);
      expect(direct.length + optional.length).toBeGreaterThan(0);
      for (const key of direct) expect(parameters.includes(key) || vars.has(key)).toBe(true);
      for (const key of optional) expect(key).toMatch(/^KB_/);
    }
  });

  it('when its roles and availability are read, then learner does not count for quorum and the Component is available while a majority of pods are', () => {
    const doc = load();

    expect(doc.spec.roles).toContainEqual(expect.objectContaining({ name: 'leader', participatesInQuorum: true }));
    expect(doc.spec.roles).toContainEqual(expect.objectContaining({ name: 'learner', participatesInQuorum: false }));
    expect(doc.spec.available.withProbe.condition).toEqual({ majority: { succeed: true } });
    expect(doc.spec.lifecycleActions.availableProbe).toMatchObject({ periodSeconds: 5, failureThreshold: 1, successThreshold: 1 });
  });

  it('when the sidecar is read, then schemes, domain and TLS files come from KubeBlocks vars, not literals', () => {
    const doc = load();
    const sidecar = doc.spec.runtime.containers.find((c: Doc) => c.name === 'etcd-lifecycle-agent');
    const env = Object.fromEntries(sidecar.env.map((e: Doc) => [e.name, e.value]));
    const vars = new Set(doc.spec.vars.map((v: Doc) => v.name));

    for (const name of [
      'ETCD_AGENT_LOCAL_ENDPOINT',
      'ETCD_AGENT_ENDPOINTS',
      'ETCD_AGENT_PEER_URL_TEMPLATE',
      'ETCD_AGENT_ETCD_CA_FILE',
      'ETCD_AGENT_ETCD_CERT_FILE',
      'ETCD_AGENT_ETCD_KEY_FILE',
    ]) {
      expect(env[name]).toBeDefined();
      expect(env[name]).not.toMatch(/https?:\/\/|cluster\.local/);
      for (const [, used] of (env[name] as string).matchAll(/\$\(([A-Z_]+)\)/g)) expect(vars).toContain(used);
    }
    expect(JSON.stringify(doc)).not.toMatch(/svc\.cluster\.local/);
    expect(doc.spec.tls).toMatchObject({
      volumeName: 'tls',
      mountPath: '/etc/pki/tls',
      caFile: 'ca.pem',
      certFile: 'cert.pem',
      keyFile: 'key.pem',
    });
    expect(doc.spec.scripts.map((s: Doc) => s.template)).not.toContain('etcd-lifecycle-agent-scripts');
  });
});
