/**
 * Layers import downward only (README "Layout"): every agent/ module imports from its own layer
 * or from a layer below it, never from one above. The ranks below are the layout's order. And no
 * module imports itself through others: agent/ has no import cycle, type-only imports included.
 */
import fs from 'node:fs';
import path from 'node:path';

const AGENT = path.resolve(__dirname, '../../agent');

/** Each layer's rank: a module may import from layers of the same or a lower rank. */
const RANKS: Readonly<Record<string, number>> = {
  proto: 0,
  lib: 1,
  observability: 2,
  config: 3,
  'etcd-data': 4,
  etcd: 5,
  membership: 6,
  health: 7,
  maintenance: 8,
  backup: 8.5,
  prepare: 9,
  recovery: 10,
  server: 11,
  'agent.ts': 12,
  cli: 13,
  'main.ts': 14,
};

/** The layer of an agent/ path ("membership/join.ts" → "membership", "config.ts" → "config.ts"). */
function layerOf(relative: string): string {
  return relative.includes('/') ? relative.split('/')[0] : relative.endsWith('.ts') ? relative : `${relative}.ts`;
}

function modules(dir = AGENT): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return modules(full);
    return e.name.endsWith('.ts') ? [path.relative(AGENT, full)] : [];
  });
}

/** The agent/ modules `file` imports by relative path (static, dynamic, require), as paths under agent/. */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(path.join(AGENT, file), 'utf8');
  return [...text.matchAll(/(?:from|import\(|require\() ?'(\.{1,2}\/[^']+)'/g)]
    .map((m) => path.relative(AGENT, path.resolve(path.dirname(path.join(AGENT, file)), m[1])))
    .filter((p) => !p.startsWith('..'));
}

/** `membership/run` → `membership/run.ts` (the module file an import names). */
function moduleFile(target: string): string {
  return target.endsWith('.ts') ? target : `${target}.ts`;
}

/**
 * The import cycles among `files` (Tarjan's strongly connected components of the import graph), each
 * as its modules in order; a module importing itself counts.
 */
export function importCycles(files: string[], importsOfFile: (file: string) => string[]): string[][] {
  const known = new Set(files);
  const edges = new Map(files.map((f) => [f, [...new Set(importsOfFile(f).map(moduleFile))].filter((t) => known.has(t))]));
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v) as number);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    for (let w = stack.pop() as string; ; w = stack.pop() as string) {
      onStack.delete(w);
      component.unshift(w);
      if (w === v) break;
    }
    if (component.length > 1 || (edges.get(v) ?? []).includes(v)) cycles.push(component);
  };
  for (const f of files) if (!index.has(f)) visit(f);
  return cycles;
}

describe('layers import downward only', () => {
  const all = modules();

  it('when a module is added, then its layer has a rank', () => {
    expect(all.map(layerOf).filter((layer) => RANKS[layer] === undefined)).toEqual([]);
  });

  it.each(all.map((f) => [f]))('when %s imports agent code, then only from its own layer or below', (file) => {
    const rank = RANKS[layerOf(file)];
    const upward = importsOf(file).filter((target) => (RANKS[layerOf(target)] ?? Infinity) > rank);
    expect(upward).toEqual([]);
  });

  it('when the import graph of agent/ is walked, then it has no cycle', () => {
    expect(importCycles(all, importsOf)).toEqual([]);
  });

  it.each<[string, string[][], Record<string, string[]>]>([
    ['a chain', [], { 'a.ts': ['b'], 'b.ts': ['c'], 'c.ts': [] }],
    ['two modules importing each other', [['a.ts', 'b.ts']], { 'a.ts': ['b'], 'b.ts': ['a'], 'c.ts': ['a'] }],
    ['a longer loop', [['a.ts', 'b.ts', 'c.ts']], { 'a.ts': ['b'], 'b.ts': ['c'], 'c.ts': ['a'] }],
    ['a module importing itself', [['a.ts']], { 'a.ts': ['a'] }],
  ])('when the graph is %s, then the cycle check finds %j', (_what, cycles, graph) => {
    expect(importCycles(Object.keys(graph), (f) => graph[f])).toEqual(cycles);
  });

  // kube-inject edits YAML only: it must load without the membership and health code (main.ts loads it on demand).
  const kubeInject = all.filter((f) => f.startsWith('cli/kube-inject'));
  it.each(kubeInject.map((f) => [f]))('when %s imports agent code, then nothing from membership/ or health/', (file) => {
    expect(importsOf(file).filter((p) => p.startsWith('membership/') || p.startsWith('health/'))).toEqual([]);
  });
});

describe("etcd's wording stays in etcd/", () => {
  // Reading an error's text: includes/startsWith/match/equality on a message, or a RegExp test of one.
  const READS_TEXT = /\.message\s*(?:\.(?:includes|startsWith|endsWith|match)\(|[!=]==)|\.test\([^)]*message/;
  const outside = modules().filter((f) => !f.startsWith('etcd/'));

  it.each(outside.map((f) => [f]))('when %s handles an error, then it never reads its text (etcdRefusal says why etcd refused)', (file) => {
    const lines = fs.readFileSync(path.join(AGENT, file), 'utf8').split('\n');
    expect(lines.filter((line) => READS_TEXT.test(line))).toEqual([]);
  });
});
