/**
 * How to start the bin as its first line says (`#!/usr/bin/env -S node FLAGS…`) with a node binary
 * of one's choosing: the tests and the bench start it with `process.execPath` (or Node 24), not
 * through `env`, and must still run it with the Node flags the bin carries.
 */
import fs from 'node:fs';

/** The Node flags on the bin's first line (empty when it names none). */
export function binNodeFlags(bin: string): string[] {
  const first = fs.readFileSync(bin, 'utf8').split('\n', 1)[0];
  const shebang = /^#!\S*env\s+(?:-S\s+)?node((?:\s+\S+)*)\s*$/.exec(first);
  if (shebang === null) throw new Error(`${bin}: the first line is not "#!/usr/bin/env -S node [flags]": ${first}`);
  return shebang[1].trim() === '' ? [] : shebang[1].trim().split(/\s+/);
}

/** argv that runs `bin` with `node` (default: this process's node) as its first line would, then `args`. */
export function binCommand(bin: string, args: string[] = [], node = process.execPath): [string, string[]] {
  return [node, [...binNodeFlags(bin), bin, ...args]];
}
