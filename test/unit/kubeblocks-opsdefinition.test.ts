/**
 * deploy/kubeblocks-opsdefinition-defragment.yaml against the real OpsDefinition CRD of KubeBlocks, and
 * the OpsRequest its header shows against the real OpsRequest CRD (test/fixtures/kubeblocks, see its
 * NOTICE), strict: unknown fields are errors. Then the command it runs, as the agent's CLI parses it.
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { parseCommand } from '../../agent/cli/command-line';
import { requestFor } from '../../agent/cli/commands';
import { crdValidator, describeErrors } from '../helpers/crd-schema';

const ROOT = path.join(__dirname, '..', '..');
const FIXTURES = path.join(ROOT, 'test/fixtures/kubeblocks');
const FILE = path.join(ROOT, 'deploy/kubeblocks-opsdefinition-defragment.yaml');

// The documents are looked into field by field.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = any;

const text = fs.readFileSync(FILE, 'utf8');
const opsDefinition = (): Doc => YAML.parse(text);
/** The OpsRequest of the file's header comment, uncommented. */
const opsRequest = (): Doc =>
  YAML.parse(
    text
      .split('\n')
      .filter((l) => l.startsWith('#   '))
      .map((l) => l.slice(4))
      .join('\n'),
  );
const validateDefinition = crdValidator(path.join(FIXTURES, 'operations.kubeblocks.io_opsdefinitions.yaml'), 'v1alpha1');
const validateRequest = crdValidator(path.join(FIXTURES, 'operations.kubeblocks.io_opsrequests.yaml'), 'v1alpha1');
const errors = (validate: typeof validateDefinition, doc: Doc): string[] => (validate(doc) ? [] : describeErrors(validate.errors));

describe('the KubeBlocks OpsDefinition of the defragmentation (deploy/kubeblocks-opsdefinition-defragment.yaml)', () => {
  it('when validated against the vendored operations.kubeblocks.io/v1alpha1 CRD with unknown fields refused, then it has no error', () => {
    expect(errors(validateDefinition, opsDefinition())).toEqual([]);
  });

  it('when the OpsRequest of its header is validated against the OpsRequest CRD, then it has no error and names this definition', () => {
    const request = opsRequest();
    expect(errors(validateRequest, request)).toEqual([]);
    expect(request.spec.custom.opsDefinitionName).toBe(opsDefinition().metadata.name);
    expect(request.spec.custom.components[0].parameters.map((p: Doc) => p.name)).toEqual(['compactRetain']);
  });

  it.each<[string, (d: Doc) => void, RegExp]>([
    [
      'an action with no exec, workload or resource modifier named wrong',
      (d) => (d.spec.actions[0].exec.cmd = ['x']),
      /exec must NOT have additional properties \(cmd\)/,
    ],
    [
      'a pod selection policy the CRD does not know',
      (d) => (d.spec.podInfoExtractors[0].podSelector.multiPodSelectionPolicy = 'Each'),
      /must be equal to one of the allowed values/,
    ],
  ])('when the definition has %s, then the same validator refuses it (the check can fail)', (_what, spoil, error) => {
    const doc = opsDefinition();
    spoil(doc);
    expect(errors(validateDefinition, doc).join('\n')).toMatch(error);
  });

  it('when its action is read, then it runs the agent CLI in the agent container of every member, for the ComponentDefinition of deploy/', () => {
    const spec = opsDefinition().spec;
    const cmpd = YAML.parse(fs.readFileSync(path.join(ROOT, 'deploy/kubeblocks-componentdefinition.yaml'), 'utf8'));
    expect(spec.componentInfos[0].componentDefinitionName).toBe(cmpd.metadata.name);
    const containers = cmpd.spec.runtime.containers.map((c: Doc) => c.name);
    expect(containers).toContain(spec.actions[0].exec.containerName);
    expect(spec.podInfoExtractors[0].podSelector.multiPodSelectionPolicy).toBe('All');
    expect(spec.actions[0].parameters).toEqual(Object.keys(spec.parametersSchema.openAPIV3Schema.properties));
  });

  it.each<[string, Record<string, unknown>]>([
    ['10000', { compact: { retainRevisions: 10000 } }],
    ['6h', { compact: { retainSeconds: 21600 } }],
    ['none', { compact: false }],
  ])(
    'when the command runs with compactRetain=%s (Kubernetes substitutes $(compactRetain)), then the CLI sends %j and waits',
    (value, body) => {
      const [bin, command, ...args] = opsDefinition().spec.actions[0].exec.command as string[];
      expect([bin, command]).toEqual(['etcd-lifecycle-agent', 'defragment']);
      const parsed = parseCommand(
        'defragment',
        args.map((a) => a.replace('$(compactRetain)', value)),
      );
      expect(parsed.wait).toBe(true);
      expect(requestFor(parsed)).toEqual({ method: 'POST', path: '/v1/maintenance/defragment', body });
    },
  );
});
