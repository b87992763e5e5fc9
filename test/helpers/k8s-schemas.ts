/**
 * Validates a Kubernetes object offline against its schema, by apiVersion and kind: core kinds with
 * kubernetes-models (compiled from Kubernetes 1.27's OpenAPI), ServiceMonitor and PrometheusRule with
 * @kubernetes-models/prometheus-operator, KubeBlocks' ComponentDefinition with its vendored CRD schema
 * (test/fixtures/schemas/README.md) through ajv. A kind with no schema here is an error, not a pass.
 */
import fs from 'node:fs';
import path from 'node:path';
import Ajv from 'ajv';
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

/**
 * The CRD schema made strict as the API server's strict field validation is: an object schema
 * that lists its properties and does not preserve unknown fields accepts no other field.
 */
export function strictSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(strictSchema);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    out[key] = key === 'properties' ? Object.fromEntries(Object.entries(value as object).map(([k, v]) => [k, strictSchema(v)])) : strictSchema(value);
  }
  if (out.properties !== undefined && out['x-kubernetes-preserve-unknown-fields'] !== true && out.additionalProperties === undefined) {
    out.additionalProperties = false;
  }
  return out;
}

function crdValidator(file: string): Validator {
  const schema = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'schemas', file), 'utf8')) as object;
  // strict: false lets ajv skip the x-kubernetes-* keywords; formats (int32, int-or-string) are not JSON Schema's.
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false, logger: false });
  const validate = ajv.compile(strictSchema(schema) as object);
  return (object) => {
    const valid = validate(object);
    if (!valid) {
      const errors = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''}${e.keyword === 'additionalProperties' ? ` (${String(e.params.additionalProperty)})` : ''}`);
      throw new Error(errors.join('; '));
    }
  };
}

let componentDefinition: Validator | undefined;

const VALIDATORS: Record<string, () => Validator> = {
  'v1/Service': () => model(Service),
  'v1/Pod': () => model(Pod),
  'apps/v1/StatefulSet': () => model(StatefulSet),
  'policy/v1/PodDisruptionBudget': () => model(PodDisruptionBudget),
  'networking.k8s.io/v1/NetworkPolicy': () => model(NetworkPolicy),
  'monitoring.coreos.com/v1/ServiceMonitor': () => model(ServiceMonitor),
  'monitoring.coreos.com/v1/PrometheusRule': () => model(PrometheusRule),
  'apps.kubeblocks.io/v1/ComponentDefinition': () =>
    (componentDefinition ??= crdValidator('apps.kubeblocks.io_componentdefinitions.v1.schema.json')),
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
