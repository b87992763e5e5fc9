/**
 * `ETCD_AGENT_DEFRAG_SCHEDULE`: a cron expression and the next time it fires. Pure (beside
 * poll.ts and deadline.ts, below settings.ts, which validates the setting with it).
 *
 * Five fields, as Kubernetes CronJobs and Vixie cron write them — minute (0–59), hour (0–23),
 * day of month (1–31), month (1–12 or jan–dec), day of week (0–7, 0 and 7 Sunday, or sun–sat) —
 * each `*`, a value, a range `a-b`, either of those with a step (`/n` after it, as in `0-30/10`), or a
 * comma list of those; or one of `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
 * `@midnight`, `@hourly`. Times are UTC
 * (a pod's clock has no other zone to agree on). As in Vixie cron, when both the day of month and
 * the day of week are restricted (neither is `*`), a day matching either fires.
 *
 * Invariant: `parseCron` either answers a schedule that fires at least once within 29 years, or
 * throws an Error saying which field is wrong (so `0 0 30 2 *`, never true, is refused at start-up).
 */

/** A parsed cron expression: the allowed values of each field, and whether the day fields were `*`. */
export interface CronSchedule {
  readonly source: string;
  readonly minutes: ReadonlySet<number>;
  readonly hours: ReadonlySet<number>;
  readonly daysOfMonth: ReadonlySet<number>;
  readonly months: ReadonlySet<number>;
  /** 0–6, Sunday 0 (a 7 in the expression is folded to 0). */
  readonly daysOfWeek: ReadonlySet<number>;
  readonly anyDayOfMonth: boolean;
  readonly anyDayOfWeek: boolean;
}

const MACROS: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

interface FieldSpec {
  name: string;
  min: number;
  max: number;
  /** Names accepted for values, the first meaning `min`. */
  names?: readonly string[];
}

const FIELDS: readonly FieldSpec[] = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day of month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: MONTHS },
  { name: 'day of week', min: 0, max: 7, names: DAYS },
];

function value(text: string, spec: FieldSpec): number {
  const named = spec.names?.indexOf(text.toLowerCase()) ?? -1;
  if (named >= 0) return spec.min + named;
  if (!/^\d{1,2}$/.test(text)) throw new Error(`${spec.name}: "${text}" is not a number${spec.names ? ' or a name' : ''}`);
  const n = Number(text);
  if (n < spec.min || n > spec.max) throw new Error(`${spec.name}: ${n} is outside ${spec.min}-${spec.max}`);
  return n;
}

function field(text: string, spec: FieldSpec): Set<number> {
  const values = new Set<number>();
  for (const part of text.split(',')) {
    const [range, stepText, extra] = part.split('/');
    if (extra !== undefined || range === '' || stepText === '')
      throw new Error(`${spec.name}: "${part}" is not a value, a range or a step`);
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1 || !/^\d+$/.test(stepText ?? '1'))
      throw new Error(`${spec.name}: step "${stepText}" is not a positive number`);
    let low: number;
    let high: number;
    if (range === '*') {
      [low, high] = [spec.min, spec.max];
    } else if (range.includes('-')) {
      const [a, b, more] = range.split('-');
      if (more !== undefined) throw new Error(`${spec.name}: "${range}" is not a range`);
      [low, high] = [value(a, spec), value(b, spec)];
      if (low > high) throw new Error(`${spec.name}: the range ${range} runs backwards`);
    } else {
      low = value(range, spec);
      // "5/15" means from 5 to the end in steps of 15, as in Vixie cron.
      high = stepText === undefined ? low : spec.max;
    }
    for (let v = low; v <= high; v += step) values.add(v);
  }
  return values;
}

/** Parses a cron expression (see the module comment); throws an Error naming the wrong field. */
export function parseCron(expression: string): CronSchedule {
  const source = expression.trim();
  const expanded = MACROS[source.toLowerCase()] ?? source;
  const parts = expanded.split(/\s+/);
  if (parts.length !== 5) {
    throw new Error(
      `"${source}" has ${parts.length} field${parts.length === 1 ? '' : 's'}; a cron expression has 5 (minute hour day-of-month month day-of-week) or is one of ${Object.keys(MACROS).join(', ')}`,
    );
  }
  const [minutes, hours, daysOfMonth, months, rawDaysOfWeek] = parts.map((p, i) => field(p, FIELDS[i]));
  const daysOfWeek = new Set([...rawDaysOfWeek].map((d) => d % 7));
  const schedule: CronSchedule = {
    source,
    minutes,
    hours,
    daysOfMonth,
    months,
    daysOfWeek,
    anyDayOfMonth: parts[2] === '*',
    anyDayOfWeek: parts[4] === '*',
  };
  if (nextAfter(schedule, new Date(Date.UTC(2000, 0, 1))) === undefined) throw new Error(`"${source}" never fires (no such day)`);
  return schedule;
}

function dayMatches(s: CronSchedule, date: Date): boolean {
  const dom = s.daysOfMonth.has(date.getUTCDate());
  const dow = s.daysOfWeek.has(date.getUTCDay());
  if (s.anyDayOfMonth && s.anyDayOfWeek) return true;
  if (s.anyDayOfMonth) return dow;
  if (s.anyDayOfWeek) return dom;
  return dom || dow;
}

/** How far ahead `nextAfter` looks: past one leap cycle and then some (a "29 Feb on a Monday" takes up to 28 years). */
const SEARCH_DAYS = 366 * 29;

/**
 * The first minute strictly after `after` (UTC) at which `schedule` fires, or undefined when it
 * never does within 29 years.
 */
export function nextAfter(schedule: CronSchedule, after: Date): Date | undefined {
  const start = new Date(after.getTime());
  start.setUTCSeconds(0, 0);
  start.setUTCMinutes(start.getUTCMinutes() + 1);
  const day = new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth(), start.getUTCDate()));
  for (let d = 0; d < SEARCH_DAYS; d++, day.setUTCDate(day.getUTCDate() + 1)) {
    if (!schedule.months.has(day.getUTCMonth() + 1) || !dayMatches(schedule, day)) continue;
    const first = d === 0 ? start.getUTCHours() * 60 + start.getUTCMinutes() : 0;
    for (let minuteOfDay = first; minuteOfDay < 24 * 60; minuteOfDay++) {
      const hour = Math.floor(minuteOfDay / 60);
      if (!schedule.hours.has(hour)) {
        minuteOfDay = hour * 60 + 59;
        continue;
      }
      if (schedule.minutes.has(minuteOfDay % 60)) return new Date(day.getTime() + minuteOfDay * 60_000);
    }
  }
  return undefined;
}
