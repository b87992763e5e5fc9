/**
 * deploy/kubeblocks-actionset-backup.yaml against KubeBlocks' own dataprotection CRDs of every vendored
 * release (test/fixtures/kubeblocks/<tag>/, see its NOTICE), strict: unknown fields are errors. Then what
 * binds it to deploy/kubeblocks-componentdefinition.yaml and its ComponentVersion: names, roles, volumes,
 * paths, image and the agent's settings, and the shell of its script.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { ValidateFunction } from 'ajv';
import YAML from 'yaml';
import { crdValidator, describeErrors } from '../helpers/crd-schema';
import { RELEASES } from '../helpers/kubeblocks-releases';

const ROOT = path.join(__dirname, '..', '..');
const FILE = path.join(ROOT, 'deploy/kubeblocks-actionset-backup.yaml');

// The documents are looked into field by field.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = any;

const documents = (): Doc[] => YAML.parseAllDocuments(fs.readFileSync(FILE, 'utf8')).map((d) => d.toJS());
const actionSet = (): Doc => documents().find((d) => d.kind === 'ActionSet');
const template = (): Doc => documents().find((d) => d.kind === 'BackupPolicyTemplate');
const cmpd: Doc = YAML.parse(fs.readFileSync(path.join(ROOT, 'deploy/kubeblocks-componentdefinition.yaml'), 'utf8'));
const container = (name: string): Doc => cmpd.spec.runtime.containers.find((c: Doc) => c.name === name);
const cmpv: Doc = YAML.parse(fs.readFileSync(path.join(ROOT, 'deploy/kubeblocks-componentversion.yaml'), 'utf8'));
const envOf = (env: Doc[]): Record<string, string> => Object.fromEntries(env.map((e) => [e.name, e.value]));

const validators = new Map<string, ValidateFunction>();
/** The strict validator of `plural` (actionsets, backuppolicytemplates) of release `tag`, compiled once. */
function validator(tag: string, plural: string): ValidateFunction {
  const key = `${tag}/${plural}`;
  let validate = validators.get(key);
  if (validate === undefined) {
    validate = crdValidator(path.join(ROOT, 'test/fixtures/kubeblocks', tag, `dataprotection.kubeblocks.io_${plural}.yaml`), 'v1alpha1');
    validators.set(key, validate);
  }
  return validate;
}
const errors = (tag: string, plural: string, doc: Doc): string[] => {
  const validate = validator(tag, plural);
  return validate(doc) ? [] : describeErrors(validate.errors);
};

const tags = RELEASES.map((r) => r.tag);

describe('the KubeBlocks backup of the agent (deploy/kubeblocks-actionset-backup.yaml)', () => {
  it('when the file is read, then it holds one ActionSet and one BackupPolicyTemplate, and nothing else', () => {
    expect(documents().map((d) => `${d.apiVersion} ${d.kind}`)).toEqual([
      'dataprotection.kubeblocks.io/v1alpha1 ActionSet',
      'dataprotection.kubeblocks.io/v1alpha1 BackupPolicyTemplate',
    ]);
  });

  it.each(tags)(
    'when the ActionSet is validated against the ActionSet CRD of %s with unknown fields refused, then it has no error',
    (tag) => {
      expect(errors(tag, 'actionsets', actionSet())).toEqual([]);
    },
  );

  it.each(tags)(
    'when the BackupPolicyTemplate is validated against the BackupPolicyTemplate CRD of %s with unknown fields refused, then it has no error',
    (tag) => {
      expect(errors(tag, 'backuppolicytemplates', template())).toEqual([]);
    },
  );

  it.each<[string, string, (d: Doc) => void, RegExp]>([
    [
      'an ActionSet whose backup job has args',
      'actionsets',
      (d) => (d.spec.backup.backupData.args = ['x']),
      /must NOT have additional properties \(args\)/,
    ],
    [
      'an ActionSet of a backup type the CRD does not know',
      'actionsets',
      (d) => (d.spec.backupType = 'Snapshot'),
      /must be equal to one of the allowed values/,
    ],
    [
      'a template whose target picks pods by a strategy the CRD does not know',
      'backuppolicytemplates',
      (d) => (d.spec.target.strategy = 'Each'),
      /must be equal to one of the allowed values/,
    ],
    [
      'a template whose method name is not a DNS label',
      'backuppolicytemplates',
      (d) => (d.spec.backupMethods[0].name = 'Agent_Snapshot'),
      /must match pattern/,
    ],
  ])('when the file has %s, then every release refuses it (the check can fail)', (_what, plural, spoil, error) => {
    const doc = plural === 'actionsets' ? actionSet() : template();
    spoil(doc);
    for (const tag of tags) expect(`${tag}: ${errors(tag, plural, doc).join('\n')}`).toMatch(error);
  });

  it('when the template has no compDefs, then v1.0.2 accepts it and every later release refuses it (so it names them)', () => {
    const doc = template();
    delete doc.spec.compDefs;
    const refusing = tags.filter((tag) => errors(tag, 'backuppolicytemplates', doc).some((e) => /compDefs/.test(e)));
    expect(refusing).toEqual(tags.filter((tag) => tag !== 'v1.0.2'));
  });

  it('when the template is read, then it offers the ActionSet as a method of the ComponentDefinition of deploy/, on a voter', () => {
    const spec = template().spec;
    expect(spec.compDefs).toEqual([cmpd.metadata.name]);
    expect(spec.serviceKind).toBe(cmpd.spec.serviceKind);
    expect(spec.backupMethods.map((m: Doc) => [m.name, m.actionSetName, m.snapshotVolumes])).toEqual([
      ['agent-snapshot', actionSet().metadata.name, false],
    ]);
    expect(spec.schedules.map((s: Doc) => s.backupMethod)).toEqual(['agent-snapshot']);
    const voters = cmpd.spec.roles.filter((r: Doc) => r.participatesInQuorum).map((r: Doc) => r.name);
    expect(voters).toContain(spec.target.role);
    expect(voters).toContain(spec.target.fallbackRole);
    expect(spec.target.role).toBe('follower');
  });

  it("when the method's volumes are read, then it is the pod's TLS volume at the containers' path, mounted read-only", () => {
    const { volumes, volumeMounts } = template().spec.backupMethods[0].targetVolumes;
    expect(volumes).toEqual([cmpd.spec.tls.volumeName]);
    expect(volumeMounts).toEqual([{ name: cmpd.spec.tls.volumeName, mountPath: cmpd.spec.tls.mountPath, readOnly: true }]);
    // The job mounts the target pod's volumes only on the target pod's node.
    expect(actionSet().spec.backup.backupData.runOnTargetPodNode).toBe(true);
  });

  it("when the ActionSet's settings are read, then they are the agent container's, from the ComponentDefinition's vars", () => {
    const env = envOf(actionSet().spec.env);
    const agent = envOf(container('etcd-lifecycle-agent').env);
    const vars = new Set(cmpd.spec.vars.map((v: Doc) => v.name));
    for (const name of ['ETCD_AGENT_ETCD_CA_FILE', 'ETCD_AGENT_ETCD_CERT_FILE', 'ETCD_AGENT_ETCD_KEY_FILE'])
      expect(env[name]).toBe(agent[name]);
    // The job runs in a pod of its own: no etcd on its loopback, only every member's client URL.
    expect(env.ETCD_AGENT_ENDPOINTS).toBe('$(CLIENT_ENDPOINTS)');
    expect(agent.ETCD_AGENT_ENDPOINTS.split(',')).toContain(env.ETCD_AGENT_ENDPOINTS);
    const referenced = Object.values(env).flatMap((v) => [...v.matchAll(/\$\((\w+)\)/g)].map((m) => m[1]));
    expect(referenced.filter((name) => !vars.has(name))).toEqual([]);
  });

  it("when the job's image is read, then it is the agent's image of every release of the ComponentVersion", () => {
    const images = new Set(cmpv.spec.releases.map((r: Doc) => r.images['etcd-lifecycle-agent']));
    expect([...images]).toEqual([actionSet().spec.backup.backupData.image]);
  });

  it('when the ActionSet is read, then it has no restore: one pod restores and the others join, which a Restore of every volume cannot do', () => {
    expect(actionSet().spec.restore).toBeUndefined();
  });

  it('when the backup script is read, then bash streams the CLI into datasafed, fails with either, and tells KubeBlocks how it ended', () => {
    const [shell, flag, script] = actionSet().spec.backup.backupData.command as string[];
    expect([shell, flag]).toEqual(['/bin/bash', '-c']);
    expect(script).toMatch(/^set -o errexit -o nounset -o pipefail$/m);
    expect(script).toContain('etcd-lifecycle-agent backup --to - | datasafed push - "${DP_BACKUP_NAME}.db"');
    expect(script).toContain('export DATASAFED_BACKEND_BASE_PATH="$DP_BACKUP_BASE_PATH"');
    expect(script).toContain('touch "${DP_BACKUP_INFO_FILE}.exit"');
    expect(script).toMatch(/>"\$DP_BACKUP_INFO_FILE"$/m);
  });

  it.each([['backup', (d: Doc) => d.spec.backup.backupData.command[2]]])(
    'when bash parses the %s script, then it has no syntax error',
    (_which, script) => {
      expect(() => execFileSync('bash', ['-n', '-c', script(actionSet())], { stdio: 'pipe' })).not.toThrow();
      expect(() => execFileSync('bash', ['-n', '-c', 'if then'], { stdio: 'pipe' })).toThrow();
    },
  );
});
