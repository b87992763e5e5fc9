/**
 * What raft did, in etcd's own words: each member's log lines, read after the fact. raft logs the
 * moment a member's view of the leader changes (`raft.node: <id> elected leader <id> at term <n>`,
 * `… lost leader <id> at term <n>`), each process start (`newRaft <id> …`), and the moment a peer
 * connects (`peer became active`), all stamped by etcd's clock, which is this machine's. No polling,
 * so nothing here depends on how fast the machine answers a sample.
 *
 * From those records a test decides what a clock bound used to guess:
 * - `elections()`: the stretches in which the voters did not agree on a leader. One starts at the
 *   first view that leaves the agreed leader (a member lost it, or named another) and ends at the
 *   line that makes a quorum of the members' views name one leader at one term. A killed member's
 *   last line stays its view, so only a line naming a leader ends a stretch, and a dead leader's
 *   stale view of itself cannot match a new term. One member losing and finding the same leader
 *   again makes a stretch that changed nothing (`changedLeadership` is false).
 * - `transfers()`: each leader's hand-over (`… starts to transfer leadership to <id>`), which makes
 *   an election of its own.
 * - `guards()`: etcd's reconfiguration guard. With its strict check (the default) etcd refuses a
 *   membership change as "unhealthy cluster" while a peer is gone and until it has been connected
 *   again for 5 s (etcdserver's HealthInterval, docs/api.md §4): a window from `peer became
 *   inactive` (or a first `peer became active`) to 5 s after `peer became active`.
 */
import fs from 'node:fs';

/** etcd's HealthInterval: how long after a peer connects a membership change may still be refused. */
export const RECONFIG_GUARD_MS = 5000;

/** One line of a member's log that says something about raft. */
export type RaftEvent =
  | { member: string; at: number; kind: 'start'; id: string }
  | { member: string; at: number; kind: 'elected' | 'lost'; leader: string; term: number }
  | { member: string; at: number; kind: 'peer-active' | 'peer-inactive'; peer: string }
  | { member: string; at: number; kind: 'transfer'; to: string; term: number };

/** A stretch without an agreed leader; `to` is undefined while it lasts. Leaders are member names where known, else hex ids. */
export interface Election {
  from: number;
  to: number | undefined;
  /** The leader and term agreed before it (undefined for the cluster's first election). */
  before?: { leader: string; term: number };
  /** The leader and term a quorum named at its end. */
  after?: { leader: string; term: number };
}

/** A window in which etcd may refuse a membership change as "unhealthy cluster": a peer gone, or back for less than 5 s. */
export interface Guard {
  member: string;
  peer: string;
  from: number;
  /** Undefined while the peer is still gone. */
  to: number | undefined;
}

/** The raft events of one member's log text (JSON lines from etcd's zap logger; any other line is skipped). */
export function raftEvents(member: string, log: string): RaftEvent[] {
  const events: RaftEvent[] = [];
  for (const line of log.split('\n')) {
    if (!line.startsWith('{')) continue;
    let entry: { ts?: unknown; msg?: unknown; 'peer-id'?: unknown };
    try {
      entry = JSON.parse(line);
    } catch {
      continue;
    }
    const at = typeof entry.ts === 'string' ? Date.parse(entry.ts) : NaN;
    const msg = typeof entry.msg === 'string' ? entry.msg : '';
    if (Number.isNaN(at)) continue;
    const view = /^raft\.node: [0-9a-f]+ (elected|lost) leader ([0-9a-f]+) at term (\d+)$/.exec(msg);
    const start = /^newRaft ([0-9a-f]+) /.exec(msg);
    const transfer = /^[0-9a-f]+ \[term (\d+)\] starts to transfer leadership to ([0-9a-f]+)$/.exec(msg);
    if (view !== null) events.push({ member, at, kind: view[1] as 'elected' | 'lost', leader: view[2], term: Number(view[3]) });
    else if (start !== null) events.push({ member, at, kind: 'start', id: start[1] });
    else if (transfer !== null) events.push({ member, at, kind: 'transfer', to: transfer[2], term: Number(transfer[1]) });
    else if (msg === 'peer became active' && typeof entry['peer-id'] === 'string')
      events.push({ member, at, kind: 'peer-active', peer: entry['peer-id'] });
    else if (msg.startsWith('peer became inactive') && typeof entry['peer-id'] === 'string')
      events.push({ member, at, kind: 'peer-inactive', peer: entry['peer-id'] });
  }
  return events;
}

/**
 * The elections of `events` (all members' together) among `voters` voters (see the module comment).
 * Pure, so that its rule is tested by a table (test/unit/raft-record.test.ts).
 */
export function electionsOf(events: ReadonlyArray<RaftEvent>, voters: number): Election[] {
  const quorum = Math.floor(voters / 2) + 1;
  const sorted = [...events].filter((e) => e.kind === 'start' || e.kind === 'elected' || e.kind === 'lost').sort((a, b) => a.at - b.at);
  const found: Election[] = [];
  /** Each member's view as its last line says, `leader@term`; a start clears it. */
  const views = new Map<string, string>();
  let agreed: { leader: string; term: number } | undefined;
  let open: Election | undefined;
  for (const e of sorted) {
    if (e.kind === 'start') {
      views.delete(e.member);
      continue;
    }
    if (e.kind !== 'elected' && e.kind !== 'lost') continue;
    const view = e.kind === 'elected' ? `${e.leader}@${e.term}` : undefined;
    if (view === undefined) views.delete(e.member);
    else views.set(e.member, view);
    if (open === undefined) {
      if (view !== undefined && agreed !== undefined && view === `${agreed.leader}@${agreed.term}`) continue;
      open = { from: e.at, to: undefined, before: agreed };
      found.push(open);
    }
    // Only a member naming a leader can end it: a lost leader never does, whatever stale lines say.
    if (view === undefined || e.kind !== 'elected') continue;
    if ([...views.values()].filter((v) => v === view).length >= quorum) {
      agreed = { leader: e.leader, term: e.term };
      Object.assign(open, { to: e.at, after: agreed });
      open = undefined;
    }
  }
  return found;
}

/** Whether `e` changed the leader or the term (not one member losing and finding the same leader again). */
export function changedLeadership(e: Election): boolean {
  return e.after === undefined || e.before === undefined || e.after.leader !== e.before.leader || e.after.term !== e.before.term;
}

/**
 * The guard windows of `events`, per member and peer: from the moment the member saw the peer go
 * (`peer became inactive`), or else from when it became active, to `RECONFIG_GUARD_MS` after it
 * became active again; a peer still gone keeps its window open (`to` undefined).
 */
export function guardsOf(events: ReadonlyArray<RaftEvent>): Guard[] {
  const found: Guard[] = [];
  const gone = new Map<string, number>();
  for (const e of [...events].sort((a, b) => a.at - b.at)) {
    if (e.kind !== 'peer-active' && e.kind !== 'peer-inactive') continue;
    const pair = `${e.member} ${e.peer}`;
    if (e.kind === 'peer-inactive') {
      if (!gone.has(pair)) gone.set(pair, e.at);
      continue;
    }
    found.push({ member: e.member, peer: e.peer, from: gone.get(pair) ?? e.at, to: e.at + RECONFIG_GUARD_MS });
    gone.delete(pair);
  }
  for (const [pair, from] of gone) {
    const [member, peer] = pair.split(' ');
    found.push({ member, peer, from, to: undefined });
  }
  return found;
}

/** Whether [from, to] meets any of `windows` (an open window lasts until now). */
export function meets(from: number, to: number, windows: ReadonlyArray<{ from: number; to: number | undefined }>): boolean {
  return windows.some((w) => w.from <= to && (w.to ?? Infinity) >= from);
}

/** The raft record of a set of members, read again from their logs at each question. */
export class RaftRecord {
  constructor(
    /** Each member's name and its whole log so far (every run of its process). */
    private readonly logs: () => Array<{ member: string; log: string }>,
    /** How many voters the quorum of an election counts. */
    private readonly voters: number,
  ) {}

  /** The members' logs as files (LocalEtcdCluster's `member.logFile`), read at each question. */
  static ofFiles(members: () => ReadonlyArray<{ name: string; logFile: string }>, voters: number): RaftRecord {
    return new RaftRecord(() => members().map((m) => ({ member: m.name, log: readOrEmpty(m.logFile) })), voters);
  }

  events(): RaftEvent[] {
    return this.logs().flatMap(({ member, log }) => raftEvents(member, log));
  }

  elections(): Election[] {
    const names = this.names();
    return electionsOf(this.events(), this.voters).map((e) => ({
      ...e,
      ...(e.before === undefined ? {} : { before: { ...e.before, leader: names.get(e.before.leader) ?? e.before.leader } }),
      ...(e.after === undefined ? {} : { after: { ...e.after, leader: names.get(e.after.leader) ?? e.after.leader } }),
    }));
  }

  guards(): Guard[] {
    const names = this.names();
    return guardsOf(this.events()).map((g) => ({ ...g, peer: names.get(g.peer) ?? g.peer }));
  }

  /**
   * The leader `member` named at `at`, by its last line before then (its name where known; none
   * after a start until it names one, or after it lost one).
   */
  leaderSeenBy(member: string, at: number): string | undefined {
    const last = this.events()
      .filter((e) => e.member === member && e.at <= at && (e.kind === 'start' || e.kind === 'elected' || e.kind === 'lost'))
      .sort((a, b) => a.at - b.at)
      .at(-1);
    return last?.kind === 'elected' ? (this.names().get(last.leader) ?? last.leader) : undefined;
  }

  /** Each hand-over of leadership, as the leader logged its start. */
  transfers(): Array<{ member: string; at: number; to: string; term: number }> {
    const names = this.names();
    return this.events().flatMap((e) =>
      e.kind === 'transfer' ? [{ member: e.member, at: e.at, to: names.get(e.to) ?? e.to, term: e.term }] : [],
    );
  }

  /** Member names by the hex ids their processes started with (a member added again keeps its name). */
  names(): Map<string, string> {
    return new Map(this.events().flatMap((e) => (e.kind === 'start' ? [[e.id, e.member] as [string, string]] : [])));
  }
}

/** An election as text: `election 12:00:01.250–12:00:01.900, term 5 → 6 (etcd-1 led → etcd-2 leads)`. */
export function describeElection(e: Election): string {
  const time = (t: number | undefined): string => (t === undefined ? 'now' : new Date(t).toISOString().slice(11, 23));
  const before = e.before === undefined ? 'none' : `term ${e.before.term}, ${e.before.leader} led`;
  const after = e.after === undefined ? 'no leader yet' : `term ${e.after.term}, ${e.after.leader} leads`;
  return `election ${time(e.from)}–${time(e.to)} (${before} → ${after})`;
}

function readOrEmpty(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}
