/**
 * The few reads and edits of `yaml` Document nodes that kube-inject's parts share (the sidecar, the
 * prepare init container), so a container's strings and env are read the same way everywhere.
 */
import { isMap, isScalar, isSeq, YAMLMap, YAMLSeq } from 'yaml';

/** The string items of a sequence node (`command`, `args`); anything else gives none. */
export function stringsOf(node: unknown): string[] {
  if (!isSeq(node)) return [];
  return node.items.map((item) => (isScalar(item) ? item.value : item)).filter((value): value is string => typeof value === 'string');
}

/** The literal `value` of the env entry `name` of a container, when it is a string. */
export function envValue(container: YAMLMap, name: string): string | undefined {
  const env = container.get('env');
  if (!isSeq(env)) return undefined;
  const value = env.items.find((e): e is YAMLMap => isMap(e) && e.get('name') === name)?.get('value');
  return typeof value === 'string' ? value : undefined;
}

/** The sequence at `key` of `map`, set to a new empty one when there is none. */
export function seqAt(map: YAMLMap, key: string): YAMLSeq {
  const found = map.get(key);
  if (isSeq(found)) return found;
  const created = new YAMLSeq();
  map.set(key, created);
  return created;
}
