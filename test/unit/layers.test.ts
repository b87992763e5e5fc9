/**
 * Layers import downward only (README "Layout"): every agent/ module imports from its own layer
 * or from a layer below it, never from one above. The ranks below are the layout's order.
 */
import fs from 'node:fs';
import path from 'node:path';

const AGENT = path.resolve(__dirname, '../../agent');

/** Each layer's rank: a module may import from layers of the same or a lower rank. */
const RANKS: Readonly<Record<string, number>> = {
  proto: 0,
  'deadline.ts': 1,
  'poll.ts': 1,
  'timings.ts': 1,
  'settings.ts': 1,
  'host-network.ts': 1,
  'crash-point.ts': 1,
  observability: 2,
  'watched-files.ts': 3,
  'config.ts': 3,
  etcd: 4,
  membership: 5,
  health: 6,
  prepare: 7,
  recovery: 8,
  server: 9,
  cli: 10,
  'agent.ts': 11,
  'main.ts': 12,
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

/** The agent/ modules `file` imports by relative path, as paths under agent/. */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(path.join(AGENT, file), 'utf8');
  return [...text.matchAll(/(?:from|import\() ?'(\.{1,2}\/[^']+)'/g)]
    .map((m) => path.relative(AGENT, path.resolve(path.dirname(path.join(AGENT, file)), m[1])))
    .filter((p) => !p.startsWith('..'));
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
