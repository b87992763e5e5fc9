/**
 * How this pod's etcd must start, decided from what prepare found: the data
 * directory, the cluster's member list (when a quorum answers), and — only
 * when nothing answers — what the initial members' own prepare steps report.
 * Pure: no I/O. The shell (run.ts) gathers the facts, does the one step
 * decided, and asks again, so a step cut short by a crash is found again by
 * the next read instead of being remembered.
 *
 * Invariants:
 * - a data directory is never deleted: at most moved aside (`move-aside`);
 * - `new` is decided only when no cluster answers and every initial member
 *   reports an empty data directory (or that it decided `new` for the same
 *   initial cluster and token): never beside a cluster that is only down;
 * - a member is only ever added through the idempotent join, which matches
 *   this pod's peer URL first, so one pod never gets two members;
 * - a backup is restored only by the initial member whose name sorts first, only when no
 *   cluster answers and every initial member reports an empty data directory
 *   (backup/restore-decision.ts); while a restore is asked or a peer waits for
 *   one, nobody decides `new`.
 */
import { matchMember } from '../membership/match';
import { comparableInitialCluster, normalizeUrl } from '../proto/urls';
import type { Member, MemberList } from '../proto/types';
import type { DataDirState } from '../etcd-data/data-dir';
import { decideRestore, type RestoreAsk } from '../backup/restore-decision';

/** A member of the initial set: `--initial-cluster` name and peer URL. */
export interface InitialMember {
  name: string;
  peerURL: string;
}

/** The bootstrap a pod's prepare decided (or would decide): etcd's `--initial-cluster` and token. */
export interface BootstrapPlan {
  initialCluster: string;
  token: string;
}

/** What another initial member's prepare said about its data directory. */
export type PeerAnswer =
  | { kind: 'empty' }
  | { kind: 'bootstrap'; plan: BootstrapPlan }
  | { kind: 'has-data'; detail: string }
  | { kind: 'no-answer'; detail: string }
  /** Its data directory is empty and it was asked to restore this backup: it waits for the restore. */
  | { kind: 'restore'; restore: RestoreAsk };

/** Everything the decision depends on. */
export interface PrepareFacts {
  self: { name: string; peerURL: string };
  dataDir: DataDirState;
  /** The bootstrap this pod decided earlier, if its marker survives inside the data directory (a wiped directory loses it too). */
  marker?: BootstrapPlan;
  cluster: { kind: 'answered'; list: MemberList } | { kind: 'unreachable'; reason: string };
  initial: InitialMember[];
  token: string;
  /** Answers of the other initial members' prepare, by name; only gathered when asked for. */
  peers?: Map<string, PeerAnswer>;
  /**
   * A recovery ordered from this pod's member (POST /v1/recovery, through its sidecar): start it once
   * with `--force-new-cluster`, if nothing answers and its data is of `clusterId`.
   */
  recovery?: { clusterId: string };
  /** The restore this pod was asked for (ETCD_AGENT_RESTORE_FROM): acted on only as restore-decision.ts says. */
  restore?: RestoreAsk;
}

/** The one step to take next. */
export type PrepareStep =
  | { kind: 'start'; state: 'new' | 'existing'; initialCluster: string; reason: string; once?: string[] }
  | { kind: 'move-aside'; reason: string }
  | { kind: 'join'; reason: string }
  | { kind: 'replace'; member: Member; reason: string }
  | { kind: 'ask-peers' }
  | { kind: 'restore'; restore: RestoreAsk; reason: string }
  | { kind: 'wait'; reason: string };

/** `name=url,…` of the initial set, as etcd's `--initial-cluster` takes it. */
export function initialClusterOf(initial: InitialMember[]): string {
  return initial.map((m) => `${m.name}=${m.peerURL}`).join(',');
}

/**
 * `--initial-cluster` for joining the cluster as it is now: every member's peer URLs (etcd checks
 * that they equal the live list's), this pod's under its own name, an unstarted one under a
 * placeholder (etcd only needs the names to be unique).
 */
export function initialClusterFromList(list: MemberList, self: { name: string; peerURL: string }, ownId?: string): string {
  return list.members
    .flatMap((m, i) => {
      const own = m.id === ownId || m.peerURLs.some((u) => sameUrl(u, self.peerURL));
      return m.peerURLs.map((u) => `${own ? self.name : m.name || `unstarted-${i}`}=${u}`);
    })
    .join(',');
}

/** Decides the next step; see the table in docs/concepts/prepare.md ("What it decides"). */
export function decidePrepare(f: PrepareFacts): PrepareStep {
  if (f.dataDir.kind === 'unusable') {
    return { kind: 'move-aside', reason: `the data directory cannot be used as it is: ${f.dataDir.reason}` };
  }
  return f.cluster.kind === 'answered' ? decideWithCluster(f, f.cluster.list) : decideWithoutCluster(f);
}

function decideWithCluster(f: PrepareFacts, list: MemberList): PrepareStep {
  const dir = f.dataDir;
  if (dir.kind === 'member') {
    if (dir.clusterId !== list.clusterId) {
      return {
        kind: 'wait',
        reason: `the data directory holds member ${dir.memberId} of cluster ${dir.clusterId}, but the cluster that answers is ${list.clusterId}; not touching it (move it aside by hand if it is stale)`,
      };
    }
    const listed = list.members.find((m) => m.id === dir.memberId);
    if (listed === undefined) {
      return { kind: 'move-aside', reason: `the data directory holds member ${dir.memberId}, which the cluster has removed` };
    }
    if (!listed.peerURLs.some((u) => sameUrl(u, f.self.peerURL))) {
      return {
        kind: 'wait',
        reason: `the data directory holds member ${dir.memberId}, whose peer URLs ${listed.peerURLs.join(', ')} are not this pod's ${f.self.peerURL}`,
      };
    }
    return {
      kind: 'start',
      state: 'existing',
      initialCluster: initialClusterFromList(list, f.self, dir.memberId),
      reason: `the data directory holds member ${dir.memberId}, which the cluster lists: start as is`,
    };
  }

  const found = matchMember(list.members, { name: f.self.name, peerURLs: [f.self.peerURL] });
  if (found.kind === 'conflict') return { kind: 'wait', reason: found.message };
  if (found.kind === 'none')
    return { kind: 'join', reason: `the cluster ${list.clusterId} does not list ${f.self.name}: join it as a learner` };
  const member = found.member;
  // A member that has ever run has published its client URLs; one that never ran has none.
  if (member.clientURLs.length > 0) {
    return {
      kind: 'replace',
      member,
      reason: `the cluster lists ${f.self.name} as member ${member.id}, which has run, but the data directory is empty (lost disk): remove it and join again as a learner`,
    };
  }
  return {
    kind: 'start',
    state: 'existing',
    initialCluster: initialClusterFromList(list, f.self, member.id),
    reason: `the cluster lists ${f.self.name} as member ${member.id}, not yet started: start it`,
  };
}

function decideWithoutCluster(f: PrepareFacts): PrepareStep {
  const unreachable = f.cluster.kind === 'unreachable' ? f.cluster.reason : '';
  const plan: BootstrapPlan = { initialCluster: initialClusterOf(f.initial), token: f.token };
  if (f.dataDir.kind === 'member') {
    if (f.recovery !== undefined) {
      if (f.recovery.clusterId !== f.dataDir.clusterId) {
        return {
          kind: 'wait',
          reason: `a recovery of cluster ${f.recovery.clusterId} was ordered, but the data directory holds member ${f.dataDir.memberId} of cluster ${f.dataDir.clusterId}`,
        };
      }
      // etcd keeps the log up to its commit index, drops the members but itself, keeps the cluster id.
      return {
        kind: 'start',
        state: 'existing',
        initialCluster: plan.initialCluster || `${f.self.name}=${f.self.peerURL}`,
        once: ['--force-new-cluster'],
        reason: `no cluster answers (${unreachable}) and a recovery from member ${f.dataDir.memberId} of cluster ${f.dataDir.clusterId} was ordered: start once with --force-new-cluster`,
      };
    }
    // etcd ignores --initial-cluster* once it has a WAL; it rejoins with its own log.
    return {
      kind: 'start',
      state: 'existing',
      initialCluster: plan.initialCluster || `${f.self.name}=${f.self.peerURL}`,
      reason: `no cluster answers (${unreachable}); the data directory holds member ${f.dataDir.memberId}: start as is`,
    };
  }
  const restore = decideRestore({ self: f.self, initial: f.initial, asked: f.restore, peers: f.peers, unreachable });
  if (restore.kind === 'restore' && f.restore !== undefined) return { kind: 'restore', restore: f.restore, reason: restore.reason };
  if (restore.kind === 'wait' || restore.kind === 'ask-peers') return restore;
  const me = f.initial.find((m) => m.name === f.self.name);
  if (me === undefined) {
    return {
      kind: 'wait',
      reason: `no cluster answers (${unreachable}) and ${f.self.name} is not one of the initial members, so it cannot bootstrap one`,
    };
  }
  if (!sameUrl(me.peerURL, f.self.peerURL)) {
    return { kind: 'wait', reason: `the initial cluster gives ${f.self.name} the peer URL ${me.peerURL}, not ${f.self.peerURL}` };
  }
  const newStart = (reason: string): PrepareStep => ({ kind: 'start', state: 'new', initialCluster: plan.initialCluster, reason });
  // Decided before and the data directory is still empty: etcd never wrote, so it never voted or
  // acknowledged anything, and starting `new` again is the same bootstrap.
  if (f.marker !== undefined && samePlan(f.marker, plan)) {
    return newStart(`no cluster answers; this pod decided to bootstrap earlier and its data directory is still empty: bootstrap`);
  }
  if (f.peers === undefined) return { kind: 'ask-peers' };
  const against = f.initial
    .filter((m) => m.name !== f.self.name)
    .flatMap((m) => {
      const answer = f.peers?.get(m.name) ?? { kind: 'no-answer', detail: 'not asked' };
      if (answer.kind === 'empty') return [];
      if (answer.kind === 'bootstrap') return samePlan(answer.plan, plan) ? [] : [`${m.name} (bootstrapping another initial cluster)`];
      if (answer.kind === 'restore') return [`${m.name} (waiting for a restore)`];
      return [`${m.name} (${answer.detail})`];
    });
  if (against.length > 0) {
    return {
      kind: 'wait',
      reason: `no cluster answers (${unreachable}) and not every initial member reports an empty data directory: ${against.join(', ')}; a cluster that is only down must not get a second one beside it`,
    };
  }
  return newStart(`no cluster answers and every initial member reports an empty data directory: bootstrap`);
}

/** Two bootstrap plans name the same cluster. */
export function samePlan(a: BootstrapPlan, b: BootstrapPlan): boolean {
  return a.token === b.token && comparableInitialCluster(a.initialCluster) === comparableInitialCluster(b.initialCluster);
}

function sameUrl(a: string, b: string): boolean {
  return comparable(a) === comparable(b);
}

function comparable(url: string): string {
  try {
    return normalizeUrl(url.trim());
  } catch {
    return url.trim().toLowerCase();
  }
}
