/**
 * The KubeBlocks releases the ComponentDefinition and its ComponentVersion are checked against: one
 * vendored CRD of each kind per release line people run (test/fixtures/kubeblocks/<tag>/, see its
 * NOTICE), and the strict validator of each.
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

/** The kinds vendored per release, by the plural of their CRD's file name. */
type Plural = 'componentdefinitions' | 'componentversions';

/** The vendored CRD of `plural` of `tag`. */
export function crdFile(tag: string, plural: Plural = 'componentdefinitions'): string {
  return path.join(__dirname, '..', 'fixtures', 'kubeblocks', tag, `apps.kubeblocks.io_${plural}.yaml`);
}

const validators = new Map<string, ValidateFunction>();

/** The strict validator of the `v1` `plural` of `tag` (compiled once). */
function validatorOf(tag: string, plural: Plural): ValidateFunction {
  const key = `${tag}/${plural}`;
  let validate = validators.get(key);
  if (validate === undefined) {
    validate = crdValidator(crdFile(tag, plural), 'v1');
    validators.set(key, validate);
  }
  return validate;
}

/** The strict validator of the `v1` ComponentDefinition of `tag` (compiled once). */
export function componentDefinitionValidator(tag: string): ValidateFunction {
  return validatorOf(tag, 'componentdefinitions');
}

/** The schema errors of `object` on `tag`'s ComponentDefinition CRD, as lines (empty when it validates). */
export function componentDefinitionErrors(tag: string, object: unknown): string[] {
  const validate = validatorOf(tag, 'componentdefinitions');
  return validate(object) ? [] : describeErrors(validate.errors);
}

/** The schema errors of `object` on `tag`'s ComponentVersion CRD, as lines (empty when it validates). */
export function componentVersionErrors(tag: string, object: unknown): string[] {
  const validate = validatorOf(tag, 'componentversions');
  return validate(object) ? [] : describeErrors(validate.errors);
}
