/**
 * A validator for a Kubernetes CustomResourceDefinition's openAPIV3Schema, strict
 * as the API server is with `kubectl apply --validate=strict`: a field the schema
 * does not list is an error, except under `x-kubernetes-preserve-unknown-fields`.
 * The CRD's CEL rules (`x-kubernetes-validations`) are not evaluated.
 *
 * A CRD of 2 MB is slow to load: most of it is parsing its YAML (kept, parsed, as JSON in the system's
 * temporary directory, by the file's SHA-256, so later runs read it at once) and the rest optimising
 * the validator's generated code, which validates a handful of objects (so it is not optimised).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import YAML from 'yaml';

type Schema = { [key: string]: unknown };

const KUBERNETES_KEYWORDS = [
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-int-or-string',
  'x-kubernetes-embedded-resource',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-map-type',
  'x-kubernetes-validations',
];

/** Marks every object schema that lists its properties as closed (additionalProperties: false). */
export function closeObjects(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closeObjects);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Schema = {};
  for (const [key, value] of Object.entries(schema as Schema)) {
    if (key === 'properties' && value !== null && typeof value === 'object') {
      out.properties = Object.fromEntries(Object.entries(value as Schema).map(([name, sub]) => [name, closeObjects(sub)]));
    } else if (key === 'enum' || key === 'default' || key === 'required' || key === 'example') {
      out[key] = value;
    } else {
      out[key] = closeObjects(value);
    }
  }
  if (out.properties !== undefined && out.additionalProperties === undefined && out['x-kubernetes-preserve-unknown-fields'] !== true) {
    out.additionalProperties = false;
  }
  return out;
}

type Crd = { spec: { versions: Array<{ name: string; schema: { openAPIV3Schema: unknown } }> } };

/** The CRD in `file`, parsed; from the JSON kept for the same bytes when there is one. */
function loadCrd(file: string): Crd {
  const text = fs.readFileSync(file, 'utf8');
  const kept = path.join(os.tmpdir(), 'etcd-lifecycle-agent-crd-json', `${createHash('sha256').update(text).digest('hex')}.json`);
  try {
    return JSON.parse(fs.readFileSync(kept, 'utf8')) as Crd;
  } catch {
    const crd = YAML.parse(text) as Crd;
    try {
      fs.mkdirSync(path.dirname(kept), { recursive: true });
      const tmp = `${kept}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, JSON.stringify(crd));
      fs.renameSync(tmp, kept);
    } catch {
      // Only a cache: a run that cannot write it parses the YAML again next time.
    }
    return crd;
  }
}

/** The strict validator of one served version of the CRD in `file`. */
export function crdValidator(file: string, version: string): ValidateFunction {
  const crd = loadCrd(file);
  const served = crd.spec.versions.find((v) => v.name === version);
  if (served === undefined) throw new Error(`${file} has no version ${version}`);
  // Kubernetes checks `pattern` with Go's regexp syntax, where `\-` is a plain dash; JavaScript's `u` mode refuses it.
  const ajv = new Ajv({ allErrors: true, strict: false, unicodeRegExp: false, code: { optimize: false } });
  for (const keyword of KUBERNETES_KEYWORDS) ajv.addKeyword(keyword);
  ajv.addFormat('int32', { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isInteger(n) });
  ajv.addFormat('date-time', { type: 'string', validate: (t: string) => !Number.isNaN(Date.parse(t)) });
  return ajv.compile(closeObjects(served.schema.openAPIV3Schema) as Schema);
}

/** Errors as lines a person can read: "/spec/lifecycleActions/memberJoin must NOT have additional properties (image)". */
export function describeErrors(errors: ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map((e) => {
    const extra =
      e.keyword === 'additionalProperties' ? ` (${String((e.params as { additionalProperty?: string }).additionalProperty)})` : '';
    return `${e.instancePath || '/'} ${e.message ?? e.keyword}${extra}`;
  });
}
