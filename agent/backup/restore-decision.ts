/**
 * Whether a pod's prepare restores the cluster from a backup, and which backup. Pure: prepare
 * (prepare/decide.ts) asks it only when no cluster answers and this pod's data directory is empty.
 *
 *   no restore asked, no initial peer waits for one                → none (the bootstrap consensus decides)
 *   no restore asked, an initial peer waits for a restore          → wait: never `new` beside a restore
 *   asked, this pod is not an initial member, or not by that URL   → wait for the restored cluster, then join
 *   asked, this pod is not the restorer                            → wait for the restorer, then join
 *   asked, the restorer, its peers not asked yet                   → ask-peers
 *   asked, the restorer, a peer has data, does not answer,
 *     bootstraps `new`, waits for another restore, or waits for
 *     this one with another initial cluster (or says none)         → wait
 *   asked, the restorer, every other initial member reports an
 *     empty data directory or that it waits for this same restore
 *     with the same initial cluster                                → restore
 *
 * The restorer is the initial member whose name sorts first, whatever the order the list is written
 * in: two pods given the same members in another order agree on it. Pods given different members
 * disagree on nothing that matters either: the restorer restores only when every peer that waits for
 * the restore reports the same initial cluster, compared as the bootstrap compares its plan (entries
 * sorted, URLs normalised).
 *
 * Invariant: at most one pod restores, and only when every other initial member's own prepare says
 * its data is gone: a cluster that is only down (its data on some disk) is never replaced by a
 * backup, and a restored cluster never gets a second one, restored or bootstrapped, beside it. Every
 * other pod waits until the restored member answers and then joins it learner-first, as any new
 * member does.
 */
import { comparableInitialCluster, normalizeUrl } from '../proto/urls';
import type { Backups } from './layout';
import type { BackupEntry } from '../proto/backup';

/**
 * A restore as asked for: the store (its canonical URL) and, optionally, one backup by name; in a
 * peer's answer, also the initial cluster that peer was given (absent from an older agent's).
 */
export interface RestoreAsk {
  source: string;
  backup?: string;
  initialCluster?: string;
}

/** A member of the initial set (`--initial-cluster`). */
export interface RestoreMember {
  name: string;
  peerURL: string;
}

/** What another initial member's prepare said, as far as the restore rule reads it. */
export type PeerReport =
  | { kind: 'empty' }
  | { kind: 'restore'; restore: RestoreAsk }
  | { kind: 'bootstrap'; plan: unknown }
  | { kind: 'has-data'; detail: string }
  | { kind: 'no-answer'; detail: string };

/** What the restore rule depends on. */
export interface RestoreFacts {
  self: RestoreMember;
  initial: readonly RestoreMember[];
  /** The restore this pod was asked for (prepare's ETCD_AGENT_RESTORE_FROM), if any. */
  asked?: RestoreAsk;
  /** The other initial members' answers, once asked for. */
  peers?: ReadonlyMap<string, PeerReport>;
  /** Why no cluster answers (the member list read's failure), for the reasons. */
  unreachable?: string;
}

/** What the restore rule says. */
export type RestoreVerdict =
  { kind: 'none' } | { kind: 'restore'; reason: string } | { kind: 'wait'; reason: string } | { kind: 'ask-peers' };

/** The pod that restores: the initial member whose name sorts first (not the list's first: lists may be ordered differently). */
export function restorerOf(initial: readonly RestoreMember[]): RestoreMember | undefined {
  return [...initial].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))[0];
}

/** `name=url,…` of the initial set, as etcd's `--initial-cluster` takes it. */
export function initialClusterText(initial: readonly RestoreMember[]): string {
  return initial.map((m) => `${m.name}=${m.peerURL}`).join(',');
}

/** Decides; see the table in the module comment. */
export function decideRestore(f: RestoreFacts): RestoreVerdict {
  const none = f.unreachable === undefined || f.unreachable === '' ? 'no cluster answers' : `no cluster answers (${f.unreachable})`;
  const others = f.initial.filter((m) => m.name !== f.self.name);
  if (f.asked === undefined) {
    const restoring = others.flatMap((m) => {
      const answer = f.peers?.get(m.name);
      return answer?.kind === 'restore' ? [`${m.name} (${describeRestore(answer.restore)})`] : [];
    });
    if (restoring.length === 0) return { kind: 'none' };
    return {
      kind: 'wait',
      reason: `${none} and initial members wait for a restore: ${restoring.join(', ')}; this pod, not asked to restore, must not bootstrap a second cluster beside it (is ETCD_AGENT_RESTORE_FROM missing here?)`,
    };
  }
  const asked = f.asked;
  const first = restorerOf(f.initial);
  const me = f.initial.find((m) => m.name === f.self.name);
  if (first === undefined || me === undefined || !sameUrl(me.peerURL, f.self.peerURL)) {
    return {
      kind: 'wait',
      reason: `${none}; ${f.self.name} at ${f.self.peerURL} is not an initial member, so it does not restore: it waits for the restored cluster to answer, then joins it`,
    };
  }
  if (first.name !== f.self.name) {
    return {
      kind: 'wait',
      reason: `${none}; ${first.name}, the initial member whose name sorts first, restores ${describeRestore(asked)}: this pod waits for it to answer, then joins it`,
    };
  }
  if (f.peers === undefined) return { kind: 'ask-peers' };
  const ownInitial = comparableInitialCluster(initialClusterText(f.initial));
  const against = others.flatMap((m) => {
    const answer = f.peers?.get(m.name) ?? { kind: 'no-answer', detail: 'not asked' };
    switch (answer.kind) {
      case 'empty':
        return [];
      case 'restore':
        if (!sameRestore(answer.restore, asked)) return [`${m.name} (waits for another restore: ${describeRestore(answer.restore)})`];
        if (answer.restore.initialCluster === undefined)
          return [`${m.name} (waits for this restore, but does not say its initial cluster)`];
        return comparableInitialCluster(answer.restore.initialCluster) === ownInitial
          ? []
          : [`${m.name} (waits for this restore with another initial cluster: ${answer.restore.initialCluster})`];
      case 'bootstrap':
        return [`${m.name} (bootstrapping a new cluster)`];
      default:
        return [`${m.name} (${answer.detail})`];
    }
  });
  if (against.length > 0) {
    return {
      kind: 'wait',
      reason: `${none}, but not every initial member reports an empty data directory: ${against.join(', ')}; a backup is restored only when every member's data is gone`,
    };
  }
  return {
    kind: 'restore',
    reason: `no cluster answers, this pod's data directory is empty and every other initial member reports an empty one: restore ${describeRestore(asked)}`,
  };
}

/** Two asks name the same restore. */
export function sameRestore(a: RestoreAsk, b: RestoreAsk): boolean {
  return a.source === b.source && (a.backup ?? '') === (b.backup ?? '');
}

/** A restore in words, for logs and reasons. */
export function describeRestore(ask: RestoreAsk): string {
  return `${ask.backup === undefined ? 'the newest verified backup' : `backup ${ask.backup}`} from ${ask.source}`;
}

/** Which backup a restore takes, or why none. */
export type BackupChoice = { kind: 'chosen'; entry: BackupEntry; why: string } | { kind: 'none'; why: string };

/**
 * The backup to restore from what the store holds: the one `name`d, else the newest verified one,
 * else (only with `unverified`) the newest one not verified. A backup whose verification failed, or
 * whose manifest does not fit its snapshot, is never restored; a named unverified one needs
 * `unverified` too.
 */
export function chooseBackup(backups: Backups, ask: { name?: string; unverified: boolean }): BackupChoice {
  const allow = 'set ETCD_AGENT_RESTORE_UNVERIFIED=true to restore an unverified backup';
  if (ask.name !== undefined) {
    const broken = backups.broken.find((b) => b.name === ask.name);
    if (broken !== undefined) return { kind: 'none', why: `backup ${ask.name} is not whole: ${broken.why}` };
    const entry = backups.entries.find((e) => e.name === ask.name);
    if (entry === undefined) {
      const held = backups.entries.map((e) => e.name);
      const listed = held.length === 0 ? 'no backup' : `${held.length} backups, the newest ${held.slice(-3).join(', ')}`;
      return { kind: 'none', why: `there is no backup ${ask.name} (the store holds ${listed})` };
    }
    const verification = entry.manifest.verification;
    if (verification !== undefined && !verification.ok) {
      return { kind: 'none', why: `backup ${ask.name} failed its verification (${verification.check}: ${verification.error})` };
    }
    if (entry.state === 'unverified' && !ask.unverified) return { kind: 'none', why: `backup ${ask.name} is not verified; ${allow}` };
    return { kind: 'chosen', entry, why: `backup ${ask.name}, as asked (${entry.state})` };
  }
  const newest = (state: BackupEntry['state']): BackupEntry | undefined => [...backups.entries].reverse().find((e) => e.state === state);
  const verified = newest('verified');
  if (verified !== undefined) return { kind: 'chosen', entry: verified, why: 'the newest verified backup' };
  const unverified = newest('unverified');
  const failed = backups.entries.filter((e) => e.state === 'failed').length;
  if (unverified !== undefined && ask.unverified) {
    return {
      kind: 'chosen',
      entry: unverified,
      why: 'no backup is verified: the newest unverified one, as ETCD_AGENT_RESTORE_UNVERIFIED allows',
    };
  }
  if (backups.entries.length === 0) {
    const broken =
      backups.broken.length === 0
        ? ''
        : ` (${backups.broken.length} not whole: ${backups.broken.map((b) => `${b.name}: ${b.why}`).join('; ')})`;
    return { kind: 'none', why: `the store holds no backup${broken}` };
  }
  const counts = `${backups.entries.length - failed} unverified, ${failed} failed verification`;
  return { kind: 'none', why: `no backup is verified (${counts})${unverified === undefined ? '' : `; ${allow}`}` };
}

/** Two peer URLs name the same endpoint (normalised; compared as text when one is not a URL). */
export function sameUrl(a: string, b: string): boolean {
  const comparable = (url: string): string => {
    try {
      return normalizeUrl(url.trim());
    } catch {
      return url.trim().toLowerCase();
    }
  };
  return comparable(a) === comparable(b);
}
