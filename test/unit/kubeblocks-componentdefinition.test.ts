/**
 * deploy/kubeblocks-componentdefinition.yaml against the real ComponentDefinition CRD of
 * KubeBlocks (test/fixtures/kubeblocks, see its NOTICE), strict: unknown fields are errors.
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { crdValidator, describeErrors } from '../helpers/crd-schema';

const ROOT = path.join(__dirname, '..', '..');
const CRD = path.join(ROOT, 'test/fixtures/kubeblocks/apps.kubeblocks.io_componentdefinitions.yaml');
const CMPD = path.join(ROOT, 'deploy/kubeblocks-componentdefinition.yaml');

// The document is looked into field by field.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = any;

const text = fs.readFileSync(CMPD, 'utf8');
const load = (): Doc => YAML.parse(text);
const validate = crdValidator(CRD, 'v1');
const errorsOf = (doc: Doc): string[] => (validate(doc) ? [] : describeErrors(validate.errors));
const MEMBERSHIP_ACTIONS = ['memberJoin', 'memberLeave', 'roleProbe', 'switchover'];

describe('the KubeBlocks ComponentDefinition (deploy/kubeblocks-componentdefinition.yaml)', () => {
  it('when validated against the vendored apps.kubeblocks.io/v1 CRD schema with unknown fields refused, then it has no error', () => {
    expect(errorsOf(load())).toEqual([]);
  });

  it.each<[string, (doc: Doc) => void, RegExp]>([
    ['an unknown field in an HTTP action', (d) => (d.spec.lifecycleActions.memberJoin.http.url = 'http://x'), /memberJoin\/http must NOT have additional properties \(url\)/],
    ['an exec action on a container spec field', (d) => (d.spec.runtime.containers[1].exec = {}), /containers\/1 must NOT have additional properties \(exec\)/],
    ['a retry interval as a string', (d) => (d.spec.lifecycleActions.memberJoin.retryPolicy.retryIntervalSeconds = '5s'), /retryIntervalSeconds must be integer/],
    ['an HTTP method the CRD does not allow', (d) => (d.spec.lifecycleActions.memberJoin.http.method = 'OPTIONS'), /method must be equal to one of the allowed values/],
    ['a role without a name', (d) => delete d.spec.roles[0].name, /roles\/0 must have required property 'name'/],
  ])('when the definition has %s, then the same validator refuses it (the check can fail)', (_what, spoil, error) => {
    const doc = load();
    spoil(doc);

    expect(errorsOf(doc).join('\n')).toMatch(error);
  });

  it('when its membership actions are read, then each is an HTTP action to the sidecar on 127.0.0.1:3501, and none runs an image of its own', () => {
    const actions = load().spec.lifecycleActions;

    for (const name of MEMBERSHIP_ACTIONS) {
      expect(actions[name].exec).toBeUndefined();
      expect(actions[name].http).toMatchObject({ port: '3501' });
      expect(actions[name].http.host ?? '127.0.0.1').toBe('127.0.0.1');
    }
    for (const action of Object.values(actions) as Doc[]) expect(action.exec?.image).toBeUndefined();
    expect(actions.roleProbe.http).toMatchObject({ method: 'GET', path: '/v1/role' });
  });

  it('when the mutating actions are read, then they require the end state and retry with an interval', () => {
    const actions = load().spec.lifecycleActions;

    for (const name of ['memberJoin', 'memberLeave', 'switchover']) {
      expect(actions[name].http.method).toBe('POST');
      expect(actions[name].http.body).toContain('"requireComplete": true');
      expect(actions[name].http.headers).toContainEqual({ name: 'Content-Type', value: 'application/json' });
      expect(actions[name].retryPolicy.maxRetries).toBeGreaterThan(0);
      expect(actions[name].retryPolicy.retryIntervalSeconds).toBeGreaterThan(0);
      // The agent answers inside kbagent's deadline of the call.
      const bodyTimeout = Number(/"timeoutSeconds": (\d+)/.exec(actions[name].http.body)?.[1]);
      expect(bodyTimeout).toBeLessThan(actions[name].timeoutSeconds);
      expect(actions[name].timeoutSeconds).toBeLessThanOrEqual(60);
    }
  });

  it('when its roles are read, then leader is exclusive and learner does not count for quorum', () => {
    const roles = load().spec.roles;

    expect(roles).toContainEqual(expect.objectContaining({ name: 'leader', isExclusive: true, participatesInQuorum: true }));
    expect(roles).toContainEqual(expect.objectContaining({ name: 'learner', participatesInQuorum: false }));
  });

  it('when the sidecar is read, then schemes, domain and TLS files come from KubeBlocks vars, not literals', () => {
    const doc = load();
    const sidecar = doc.spec.runtime.containers.find((c: Doc) => c.name === 'etcd-lifecycle-agent');
    const env = Object.fromEntries(sidecar.env.map((e: Doc) => [e.name, e.value]));
    const vars = new Set(doc.spec.vars.map((v: Doc) => v.name));

    for (const name of ['ETCD_AGENT_LOCAL_ENDPOINT', 'ETCD_AGENT_ENDPOINTS', 'ETCD_AGENT_PEER_URL_TEMPLATE', 'ETCD_AGENT_ETCD_CA_FILE', 'ETCD_AGENT_ETCD_CERT_FILE', 'ETCD_AGENT_ETCD_KEY_FILE']) {
      expect(env[name]).toBeDefined();
      expect(env[name]).not.toMatch(/https?:\/\/|cluster\.local/);
      for (const [, used] of (env[name] as string).matchAll(/\$\(([A-Z_]+)\)/g)) expect(vars).toContain(used);
    }
    expect(JSON.stringify(doc)).not.toMatch(/svc\.cluster\.local/);
    expect(doc.spec.tls).toMatchObject({ volumeName: 'tls', mountPath: '/etc/pki/tls', caFile: 'ca.pem', certFile: 'cert.pem', keyFile: 'key.pem' });
    expect(doc.spec.scripts.map((s: Doc) => s.template)).not.toContain('etcd-lifecycle-agent-scripts');
  });
});
