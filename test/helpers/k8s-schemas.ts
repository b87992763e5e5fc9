/**
 * Validates a Kubernetes object offline against its schema, by apiVersion and kind: core kinds with
 * kubernetes-models (compiled from Kubernetes 1.27's OpenAPI), ServiceMonitor and PrometheusRule with
 * @kubernetes-models/prometheus-operator, KubeBlocks' ComponentDefinition and ComponentVersion with the
 * vendored CRD schemas of every KubeBlocks release line (test/fixtures/kubeblocks, see its NOTICE; kubeblocks-releases.ts), each
 * strictly: an object must validate on all of them. A kind with no schema here is an error, not a pass.
 */
import { componentDefinitionErrors, componentVersionErrors, RELEASES } from './kubeblocks-releases';
import { Service } from 'kubernetes-models/v1/Service';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { Pod } from 'kubernetes-models/v1/Pod';
import { PrometheusRule, ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';

/** A parsed Kubernetes object. */
export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; [k: string]: unknown }; [k: string]: unknown };

type Validator = (object: K8sObject) => void;

// Each model's constructor takes the object as is; validate() throws with ajv's messages.
const model =
  (Model: new (data: never) => { validate(): void }): Validator =>
  (object) =>
    new Model(object as never).validate();

/** Throws the errors of every release whose CRD refuses the object, each line prefixed with its tag. */
const kubeBlocksValidator =
  (errorsOf: (tag: string, object: unknown) => string[]): Validator =>
  (object) => {
    const errors = RELEASES.flatMap((r) => errorsOf(r.tag, object).map((e) => `${r.tag}: ${e}`));
    if (errors.length > 0) throw new Error(errors.join('; '));
  };

const VALIDATORS: Record<string, () => Validator> = {
  'v1/Service': () => model(Service),
  'v1/Pod': () => model(Pod),
  'apps/v1/StatefulSet': () => model(StatefulSet),
  'policy/v1/PodDisruptionBudget': () => model(PodDisruptionBudget),
  'networking.k8s.io/v1/NetworkPolicy': () => model(NetworkPolicy),
  'monitoring.coreos.com/v1/ServiceMonitor': () => model(ServiceMonitor),
  'monitoring.coreos.com/v1/PrometheusRule': () => model(PrometheusRule),
  'apps.kubeblocks.io/v1/ComponentDefinition': () => kubeBlocksValidator(componentDefinitionErrors),
  'apps.kubeblocks.io/v1/ComponentVersion': () => kubeBlocksValidator(componentVersionErrors),
};

/** The schema errors of `object` (empty when it validates); a kind without a schema is one error. */
export function schemaErrors(object: K8sObject): string[] {
  const key = `${object.apiVersion}/${object.kind}`;
  const validator = VALIDATORS[key];
  if (validator === undefined) return [`no schema for ${key}`];
  try {
    validator()(object);
    return [];
  } catch (err) {
    return [`${key} ${object.metadata?.name}: ${err instanceof Error ? err.message : String(err)}`];
  }
}
