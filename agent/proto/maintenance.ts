/**
 * Wire shapes of the maintenance call (POST /v1/maintenance/defragment) and of what `/v1/health`
 * shows of a run in progress, and the one way a compaction retention is written: `1000` (revisions)
 * or `90s`, `30m`, `6h`, `2d` (a duration), as the setting and the CLI take it. Pure.
 */
import { AgentError } from './errors';

/** How much history a compaction before the defragmentation keeps: the last N revisions, or the last N seconds. */
export type Retention = { retainRevisions: number } | { retainSeconds: number };

const UNIT_SECONDS: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** The longest retention written as a duration: a year (a longer one keeps everything the agent can know of). */
export const MAX_RETAIN_SECONDS = 366 * 86_400;

/**
 * `1000` → the last 1000 revisions; `90s` / `30m` / `6h` / `2d` → the last so many seconds. Throws
 * a `bad-request` AgentError naming `what` for anything else (zero included: "keep nothing" is not
 * a retention; compact to the current revision with `1`).
 */
export function parseRetention(text: string, what = 'retention'): Retention {
  const match = /^(\d{1,15})([smhd]?)$/.exec(text.trim());
  const n = match === null ? NaN : Number(match[1]);
  if (match === null || !Number.isSafeInteger(n) || n < 1) {
    throw new AgentError(
      'bad-request',
      `${what}: "${text}" is neither a number of revisions (e.g. 1000) nor a duration (e.g. 90s, 30m, 6h, 2d)`,
    );
  }
  if (match[2] === '') return { retainRevisions: n };
  const seconds = n * UNIT_SECONDS[match[2]];
  if (seconds > MAX_RETAIN_SECONDS) throw new AgentError('bad-request', `${what}: "${text}" is longer than a year`);
  return { retainSeconds: seconds };
}

/** A retention as a person writes it back: `1000 revisions`, `3600 s`. */
export function describeRetention(r: Retention): string {
  return 'retainRevisions' in r ? `the last ${r.retainRevisions} revisions` : `the last ${r.retainSeconds} s`;
}

/** A database's two sizes, as etcd's Status reports them. */
export interface DbSizes {
  dbSizeBytes: number;
  dbSizeInUseBytes: number;
}

/** One member as a defragmentation answer shows it. */
export interface DefragmentedMember {
  id: string;
  name: string;
  /** Sizes just before its defragmentation, and just after. */
  before: DbSizes;
  after: DbSizes;
  durationMs: number;
  /** It led the cluster when its turn came: leadership was moved to a member already defragmented first. */
  wasLeader: boolean;
  /** Defragmented by an earlier run that stopped (its agent died) and this one continued. */
  earlierRun?: boolean;
}

/** A member the run left alone, and why (below the thresholds, a learner). */
export interface SkippedMember {
  id: string;
  name: string;
  reason: string;
  dbSizeBytes?: number;
  dbSizeInUseBytes?: number;
}

/**
 * The answer of POST /v1/maintenance/defragment (without `requestId`). `complete` is false while the
 * run goes on in the agent (HTTP 202): call again to hear how it ended.
 */
export interface DefragmentResult {
  action: 'defragment';
  outcome: 'defragmented' | 'nothing-to-do' | 'in-progress';
  complete: boolean;
  run: {
    id: string;
    /** The agent (member name) running it. */
    agent: string;
    startedAt: string;
    finishedAt?: string;
    /** `lock`: under the cluster's membership lock; `nospace`: while etcd's NOSPACE alarm refuses the lock (docs/operations/defragmentation.md, "Under NOSPACE"). */
    mode: 'lock' | 'nospace';
    step: string;
    /** It continued an earlier run that stopped before its end (the earlier run's id). */
    continues?: string;
  };
  compaction: { revision: number; retention: Retention } | { skipped: string } | null;
  members: DefragmentedMember[];
  skipped: SkippedMember[];
  leaderTransferred: boolean;
  alarm: { noSpace: boolean; disarmed: boolean };
  /** For a call that found nothing to do: the last run that did something, as recorded in etcd. */
  lastRun?: DefragmentRecord;
  durationMs: number;
}

/** What a run records in etcd under the key prefix (`maintenance/defragment`), so a later call can say what was done. */
export interface DefragmentRecord {
  id: string;
  agent: string;
  startedAt: string;
  finishedAt?: string;
  outcome?: DefragmentResult['outcome'];
  members: DefragmentedMember[];
  compaction?: DefragmentResult['compaction'];
}

/** What `/v1/health` shows of a defragmentation this agent is running (`maintenance`). */
export interface MaintenanceView {
  action: 'defragment';
  runId: string;
  agent: string;
  mode: 'lock' | 'nospace';
  startedAt: string;
  step: string;
  /** The member being defragmented now, if one is. */
  defragmenting?: { id: string; name: string };
}
