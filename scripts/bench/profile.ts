/**
 * Reads a V8 CPU profile (node --cpu-prof) and says where the time went: self
 * time by package (express, etcd3, Node's http, GC, …), time spent under each
 * package anywhere in the stack (for start-up: the cost of loading it), and the
 * hottest functions. This is what a missed target's note quotes.
 */
import fs from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Milliseconds and share of busy (non-idle) time. */
export interface Share {
  name: string;
  ms: number;
  pct: number;
}

/** Where a profile's time went. */
export interface ProfileSummary {
  busyMs: number;
  idleMs: number;
  /** Self time by package or runtime part. */
  self: Share[];
  /** Time with a frame of the package anywhere on the stack. */
  inclusive: Share[];
  /** Hottest functions by self time. */
  functions: Share[];
  /** The agent's layers and main libraries, inclusive, whatever their rank. */
  focus: Share[];
}

/** Package or runtime part a frame belongs to. */
export function categoryOf(frame: CallFrame): string {
  const { functionName, url } = frame;
  if (functionName === '(garbage collector)') return 'GC';
  if (functionName === '(program)') return '(program: V8 compile/native)';
  if (functionName === '(idle)') return '(idle)';
  if (functionName === '(root)') return '(root)';
  if (url === '') return `native ${functionName || '(anonymous)'}`;
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (modules !== null) return modules[1];
  if (url.startsWith('node:')) {
    const parts = url.slice(5).split('/');
    return `node:${parts.slice(0, parts[0] === 'internal' ? 2 : 1).join('/')}`;
  }
  const own = /\/dist\/(agent|scripts)\/(?:([^/]+)\/)?/.exec(url);
  if (own !== null) return own[2] === undefined || own[2].endsWith('.js') ? own[1] : `${own[1]}/${own[2]}`;
  return url;
}

/** A profile's times in microseconds, by package, by package anywhere on the stack, and by function. */
export interface ProfileTotals {
  busyUs: number;
  idleUs: number;
  self: Map<string, number>;
  inclusive: Map<string, number>;
  functions: Map<string, number>;
}

/** Reads the profile in `file` into totals. */
export function readProfile(file: string): ProfileTotals {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const totals: ProfileTotals = { busyUs: 0, idleUs: 0, self: new Map(), inclusive: new Map(), functions: new Map() };
  const add = (m: Map<string, number>, k: string, us: number): void => void m.set(k, (m.get(k) ?? 0) + us);
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    const node = byId.get(id);
    if (node === undefined) return;
    const category = categoryOf(node.callFrame);
    if (category === '(idle)') {
      totals.idleUs += us;
      return;
    }
    totals.busyUs += us;
    add(totals.self, category, us);
    add(
      totals.functions,
      `${node.callFrame.functionName || '(anonymous)'} ${shortUrl(node.callFrame.url)}:${node.callFrame.lineNumber + 1}`,
      us,
    );
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at);
      if (frame === undefined) break;
      seen.add(categoryOf(frame.callFrame));
    }
    seen.delete('(root)');
    for (const c of seen) add(totals.inclusive, c, us);
  });
  return totals;
}

/**
 * `work` minus `base` (a profile of the same process doing nothing but start and stop), divided by
 * `calls`: where the time of one call went, without the start-up that --cpu-prof cannot leave out.
 */
export function diffProfiles(work: ProfileTotals, base: ProfileTotals, calls: number): ProfileTotals {
  const sub = (a: Map<string, number>, b: Map<string, number>): Map<string, number> =>
    new Map([...a].map(([k, v]) => [k, Math.max(0, (v - (b.get(k) ?? 0)) / calls)] as [string, number]));
  return {
    busyUs: Math.max(0, (work.busyUs - base.busyUs) / calls),
    idleUs: Math.max(0, (work.idleUs - base.idleUs) / calls),
    self: sub(work.self, base.self),
    inclusive: sub(work.inclusive, base.inclusive),
    functions: sub(work.functions, base.functions),
  };
}

/** `totals` divided by `calls`: the profile of one call. */
export function perCallProfile(totals: ProfileTotals, calls: number): ProfileTotals {
  return diffProfiles(totals, { busyUs: 0, idleUs: 0, self: new Map(), inclusive: new Map(), functions: new Map() }, calls);
}

/** Parts every note names, whatever their rank: the agent's own layers and the libraries it builds on. */
const FOCUS = [
  'agent/server',
  'agent/membership',
  'agent/health',
  'agent/etcd',
  'agent/observability',
  'express',
  'router',
  'winston',
  'logform',
  'prom-client',
  'zod',
  'etcd3',
  '@grpc/grpc-js',
  'GC',
];

/** The top `top` entries of each list, shares of busy time. */
export function summarizeTotals(totals: ProfileTotals, top = 8): ProfileSummary {
  const list = (m: Map<string, number>): Share[] =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({
        name,
        ms: Math.round(us / 10) / 100,
        pct: totals.busyUs === 0 ? 0 : Math.round((1000 * us) / totals.busyUs) / 10,
      }));
  const share = (name: string, us: number): Share => ({
    name,
    ms: Math.round(us / 10) / 100,
    pct: totals.busyUs === 0 ? 0 : Math.round((1000 * us) / totals.busyUs) / 10,
  });
  return {
    busyMs: Math.round(totals.busyUs / 10) / 100,
    idleMs: Math.round(totals.idleUs / 10) / 100,
    self: list(totals.self),
    inclusive: list(totals.inclusive),
    functions: list(totals.functions),
    focus: FOCUS.map((name) => share(name, (name === 'GC' ? totals.self : totals.inclusive).get(name) ?? 0)).filter((s) => s.pct >= 0.5),
  };
}

/** Summarises the profile in `file`, `top` entries per list. */
export function summarizeProfile(file: string, top = 8): ProfileSummary {
  return summarizeTotals(readProfile(file), top);
}

/** One line per list, for a report note. */
export function describeProfile(summary: ProfileSummary, entries = 6): string {
  const show = (shares: Share[]): string =>
    shares
      .slice(0, entries)
      .map((s) => `${s.name} ${s.pct}%`)
      .join(', ');
  const focus = summary.focus.map((s) => `${s.name} ${s.pct}%`).join(', ');
  return `busy ${summary.busyMs} ms; self time: ${show(summary.self)}; under (inclusive): ${show(summary.inclusive)}; by layer (inclusive): ${focus}; hottest functions: ${show(summary.functions.slice(0, 4))}`;
}

function shortUrl(url: string): string {
  const modules = url.lastIndexOf('node_modules/');
  if (modules >= 0) return url.slice(modules + 'node_modules/'.length);
  const dist = url.indexOf('/dist/');
  if (dist >= 0) return url.slice(dist + 1);
  return url.replace(/^file:\/\//, '');
}
