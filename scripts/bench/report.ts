/**
 * The one table and its JSON twin: every figure beside its baseline, the
 * ratio between them, the target and whether it was met.
 */
import fs from 'node:fs';
import os from 'node:os';

/** One measured figure. */
export interface Row {
  /** Which measurement produced it (a module of scripts/bench). */
  section: string;
  figure: string;
  value: number;
  unit: string;
  baseline?: { name: string; value: number; unit: string };
  /** The ratio the target is about, and how it is formed (e.g. "agent ÷ (a)"). */
  ratio?: { value: number; of: string };
  /** The target the figure is held to (its bound, as the report prints it), when there is one. */
  target?: string;
  pass?: boolean;
  /** Samples' summaries and anything else worth keeping in the JSON. */
  detail?: Record<string, unknown>;
}

/**
 * A row that compares `value` with a baseline in the same unit: its ratio is value ÷ baseline,
 * named `of` (e.g. "agent ÷ etcd"); `more` adds the target, the verdict or the detail.
 */
export function compared(
  section: string,
  figure: string,
  value: number,
  unit: string,
  baseline: { name: string; value: number },
  of: string,
  more: Pick<Row, 'target' | 'pass' | 'detail'> = {},
): Row {
  return { section, figure, value, unit, baseline: { ...baseline, unit }, ratio: { value: value / baseline.value, of }, ...more };
}

/** What the whole run produced. */
export interface Results {
  date: string;
  machine: { cpus: string; cores: number; memoryGiB: number; kernel: string; node: string; etcd: string; loadAverage: number[] };
  quick: boolean;
  settings: Record<string, unknown>;
  rows: Row[];
  notes: string[];
  durationSeconds?: number;
  /** 1/5/15-minute load averages when the run ended (this machine is shared). */
  loadAverageAtEnd?: number[];
}

/** Describes this machine for the report header. */
export function machine(etcdVersion: string): Results['machine'] {
  const cpus = os.cpus();
  return {
    cpus: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    etcd: etcdVersion,
    loadAverage: os.loadavg().map((l) => Math.round(l * 100) / 100),
  };
}

/** A number as a report shows it: 3 significant digits, no exponent. */
export function fmt(value: number | undefined, unit = ''): string {
  if (value === undefined || Number.isNaN(value)) return '—';
  const abs = Math.abs(value);
  const digits = abs >= 100 ? 0 : abs >= 10 ? 1 : 2;
  const text = value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
  return unit === '' ? text : `${text} ${unit}`;
}

/** The table as fixed-width text. */
export function renderTable(rows: Row[]): string {
  const header = ['figure', 'agent', 'baseline', 'baseline value', 'ratio', 'target', 'met'];
  const lines = rows.map((r) => [
    r.figure,
    fmt(r.value, r.unit),
    r.baseline?.name ?? '—',
    r.baseline === undefined ? '—' : fmt(r.baseline.value, r.baseline.unit),
    r.ratio === undefined ? '—' : `${fmt(r.ratio.value)}× (${r.ratio.of})`,
    r.target ?? '—',
    r.pass === undefined ? '' : r.pass ? 'yes' : 'NO',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const row = (cells: string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i]))
      .join(' | ')
      .trimEnd();
  const out = [row(header), widths.map((w) => '-'.repeat(w)).join('-|-')];
  let section = '';
  for (let i = 0; i < rows.length; i++) {
    if (rows[i].section !== section) {
      section = rows[i].section;
      out.push(`[${section}]`);
    }
    out.push(row(lines[i]));
  }
  return out.join('\n');
}

/** The full text report: header, table, notes. */
export function renderReport(results: Results): string {
  const m = results.machine;
  const head = [
    `etcd-lifecycle-agent bench — ${results.date}${results.quick ? ' (BENCH_QUICK: short run, not for quoting)' : ''}`,
    `machine: ${m.cpus}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.kernel}; node ${m.node}; etcd ${m.etcd}; load average at start ${m.loadAverage.join(' ')}`,
    `settings: ${Object.entries(results.settings)
      .map(([k, v]) => `${k}=${String(v)}`)
      .join(', ')}`,
    '',
  ];
  const notes = results.notes.length === 0 ? [] : ['', 'notes:', ...results.notes.map((n) => `- ${n}`)];
  const end = results.loadAverageAtEnd === undefined ? '' : `; load average at the end ${results.loadAverageAtEnd.join(' ')}`;
  const tail = results.durationSeconds === undefined ? [] : ['', `bench took ${Math.round(results.durationSeconds)} s${end}`];
  return [...head, renderTable(results.rows), ...notes, ...tail].join('\n');
}

/** Writes `results` as JSON to `file`. */
export function writeJson(file: string, results: Results): void {
  fs.writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
}
