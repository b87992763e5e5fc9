/**
 * deploy/kubeblocks-componentdefinition.yaml against the ComponentDefinition CRD of every KubeBlocks
 * release line (test/fixtures/kubeblocks, see its NOTICE), strict: unknown fields are errors. The one
 * file must install on each of them, so a field only newer releases know fails here. Also the rules
 * KubeBlocks' real controller taught it (test/kube/kubeblocks.test.ts runs it there), and its
 * ComponentVersion (deploy/kubeblocks-componentversion.yaml).
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { componentDefinitionErrors, componentVersionErrors, RELEASES } from '../helpers/kubeblocks-releases';

const ROOT = path.join(__dirname, '..', '..');
const CMPD = path.join(ROOT, 'deploy/kubeblocks-componentdefinition.yaml');
const CMPV = path.join(ROOT, 'deploy/kubeblocks-componentversion.yaml');

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

  it.each(TAGS)('when its ComponentVersion is validated strictly against the CRD of KubeBlocks %s, then it has no error', (tag) => {
    const version = YAML.parse(fs.readFileSync(CMPV, 'utf8'));
    expect(componentVersionErrors(tag, version)).toEqual([]);
    // The check can fail: a release without its images is refused.
    delete version.spec.releases[0].images;
    expect(componentVersionErrors(tag, version).join('\n')).toMatch(/images/);
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
    expect(actions.availableProbe.http).toMatchObject({ method: 'GET', path: '/v1/available?stampSeconds=10' });
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
  });

  it("when its vars are read, then none is named ETCD_*: KubeBlocks puts every var into etcd's environment, where etcd takes ETCD_<FLAG> for a flag", () => {
    const names: string[] = load().spec.vars.map((v: Doc) => v.name);

    expect(names.filter((n) => n.startsWith('ETCD_'))).toEqual([]);
  });

  it('when every container is read, then each $(VAR) it uses is a var of the definition or its own env, so the kubelet expands them all', () => {
    const doc = load();
    const vars = new Set<string>(doc.spec.vars.map((v: Doc) => v.name));
    const unexpanded: string[] = [];
    for (const c of [...doc.spec.runtime.initContainers, ...doc.spec.runtime.containers]) {
      const own = new Set<string>((c.env ?? []).map((e: Doc) => e.name));
      const words = [...(c.command ?? []), ...(c.args ?? []), ...(c.env ?? []).map((e: Doc) => e.value ?? '')].join(' ');
      for (const [, used] of words.matchAll(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g))
        if (!vars.has(used) && !own.has(used)) unexpanded.push(`${c.name}: ${used}`);
    }
    expect(unexpanded).toEqual([]);
  });

  it('when its start is read, then prepare decides it, etcd takes no --config-file, and the first members start together', () => {
    const doc = load();
    const [prepare] = doc.spec.runtime.initContainers;
    const etcd = doc.spec.runtime.containers.find((c: Doc) => c.name === 'etcd');

    expect(prepare.command.join(' ')).toMatch(/exec etcd-lifecycle-agent prepare$/);
    expect(etcd.command).toEqual(['/var/run/etcd-lifecycle-agent/sh', '/var/run/etcd-lifecycle-agent/etcd-start', '/usr/local/bin/etcd']);
    expect(etcd.args.filter((a: string) => a.startsWith('--config-file'))).toEqual([]);
    // OrderedReady would wait for pod 0 to be Ready, which it is only once a quorum has bootstrapped.
    expect(doc.spec.podManagementPolicy).toBe('Parallel');
    expect(doc.spec.configs ?? []).toEqual([]);
    expect(doc.spec.scripts ?? []).toEqual([]);
  });

  it("when its name is read, then the KubeBlocks etcd addon's ComponentVersion (compDefs ^etcd-3.*) does not take it", () => {
    expect(load().metadata.name).not.toMatch(/^etcd-3.*/);
    expect(load().metadata.annotations['kubeblocks.io/crd-api-version']).toBe('apps.kubeblocks.io/v1');
  });

  it('when its ComponentVersion is read, then it is for this definition alone and every release names an image for every container', () => {
    const doc = load();
    const version: Doc = YAML.parse(fs.readFileSync(CMPV, 'utf8'));
    const containers = [...doc.spec.runtime.initContainers, ...doc.spec.runtime.containers].map((c: Doc) => c.name).sort();

    expect(version.metadata.annotations['kubeblocks.io/crd-api-version']).toBe('apps.kubeblocks.io/v1');
    const [rule] = version.spec.compatibilityRules;
    expect(new RegExp(rule.compDefs[0]).test(doc.metadata.name)).toBe(true);
    expect(rule.releases).toEqual(version.spec.releases.map((r: Doc) => r.name));
    for (const release of version.spec.releases) {
      expect({ release: release.name, containers: Object.keys(release.images).sort() }).toEqual({ release: release.name, containers });
      expect(release.images.etcd).toBe(`quay.io/coreos/etcd:v${release.serviceVersion}`);
    }
  });
});
