/**
 * The KubeBlocks releases the ComponentDefinition is checked against: one vendored CRD per release
 * line people run (test/fixtures/kubeblocks/<tag>/, see its NOTICE), and the strict validator of each.
 */
import path from 'node:path';
import type { ValidateFunction } from 'ajv';
import { crdValidator, describeErrors } from './crd-schema';

/** One release line and the tag its CRD was copied from. */
export interface KubeBlocksRelease {
  tag: string;
  line: string;
}

/** Newest first within each line, as the NOTICE lists them. */
export const RELEASES: readonly KubeBlocksRelease[] = [
  { tag: 'v1.0.2', line: 'newest stable' },
  { tag: 'v1.0.3-beta.11', line: 'newest 1.0.x pre-release' },
  { tag: 'v1.1.0-beta.9', line: 'newest 1.1' },
  { tag: 'v1.2.0-alpha.3', line: 'newest 1.2 (= main)' },
];

/** The vendored ComponentDefinition CRD of `tag`. */
export function crdFile(tag: string): string {
  return path.join(__dirname, '..', 'fixtures', 'kubeblocks', tag, 'apps.kubeblocks.io_componentdefinitions.yaml');
}

const validators = new Map<string, ValidateFunction>();

/** The strict validator of the `v1` ComponentDefinition of `tag` (compiled once). */
export function componentDefinitionValidator(tag: string): ValidateFunction {
  let validate = validators.get(tag);
  if (validate === undefined) {
    validate = crdValidator(crdFile(tag), 'v1');
    validators.set(tag, validate);
  }
  return validate;
}

/** The schema errors of `object` on `tag`'s CRD, as lines (empty when it validates). */
export function componentDefinitionErrors(tag: string, object: unknown): string[] {
  const validate = componentDefinitionValidator(tag);
  return validate(object) ? [] : describeErrors(validate.errors);
}
