/**
 * Wire shapes of the recovery routes: `GET /v1/recovery` (the plan), `POST /v1/recovery` (the act),
 * `GET /v1/recovery/local` (one agent's own member, read by the others' plans), and the record a
 * recovery leaves in etcd. Shapes only.
 */
import type { Member } from './types';

/** What one member's log says, from its etcd's Status or, when its etcd is down, from its data directory. */
export interface MemberLogState {
  name: string;
  id: string;
  /** `etcd`: its Status answered; `data-dir`: its agent read its WAL; `none`: neither. */
  source: 'etcd' | 'data-dir' | 'none';
  clusterId: string | null;
  raftTerm: number | null;
  /** The highest index it knows committed: what a recovery from it keeps. */
  committedIndex: number | null;
  appliedIndex: number | null;
  /** Its last log entry, read from the WAL only (Status does not report it). */
  lastIndex: number | null;
  isLearner: boolean | null;
  /** Why it is `none`, or what failed on the way. */
  errors: string[];
}

/** A survivor a recovery would remove and move aside, and what it has that the chosen member lacks. */
export interface BehindSurvivor {
  name: string;
  id: string;
  committedIndex: number;
  /** Committed entries it lacks against the chosen member: what choosing it instead would drop. */
  entriesBehind: number;
}

/** `GET /v1/recovery`. */
export interface RecoveryPlan {
  /** False while a quorum answers: nothing to recover. */
  needed: boolean;
  /** True when a recovery could be ordered now or once the loss has lasted long enough. */
  possible: boolean;
  reason: string;
  clusterId: string | null;
  quorum: { voters: number; answering: number; required: number; hasQuorum: boolean } | null;
  quorumLostSince: string | null;
  quorumLostForSeconds: number | null;
  minLossSeconds: number;
  members: MemberLogState[];
  recoverFrom: { name: string; id: string; committedIndex: number; raftTerm: number } | null;
  keeps: { committedIndex: number } | null;
  drops: { membersRemoved: string[]; lost: string[]; behind: BehindSurvivor[] } | null;
  /** What to send, and where: POST /v1/recovery goes to the chosen member's own agent. */
  call: { agent: string | null; body: { from: string; clusterId: string } } | null;
  /** The recovery already made, when the cluster that answers holds its record. */
  recovered: RecoveryRecord | null;
}

/** What a recovery did, kept in etcd under the key prefix (`<prefix>recovery`) once the cluster is writable. */
export interface RecoveryRecord {
  id: string;
  clusterId: string;
  from: { name: string; id: string; committedIndex: number; raftTerm: number };
  /** Members removed by `--force-new-cluster`: lost (nothing answered for them) or behind (moved aside, rejoin as learners). */
  removed: Array<{ name: string; id: string; kind: 'lost' | 'behind'; committedIndex: number | null }>;
  quorumLostSince: string | null;
  orderedAt: string;
  writableAt: string;
  force: boolean;
}

/** `GET /v1/recovery/local`: this agent's own member, for the other agents' plans. */
export interface LocalRecoveryState {
  name: string;
  etcd: {
    memberId: string;
    clusterId: string | null;
    raftTerm: number;
    committedIndex: number;
    appliedIndex: number;
    isLearner: boolean;
  } | null;
  etcdError: string | null;
  dataDir:
    | { kind: 'member'; memberId: string; clusterId: string; raftTerm: number; committedIndex: number; lastIndex: number; segment: string }
    | { kind: 'empty' | 'unusable' | 'not-configured' | 'unreadable'; reason?: string };
  quorumLostSince: string | null;
  /** The recovery this agent is carrying out, if any (its order in the start directory). */
  order: RecoveryOrder | null;
}

/** A recovery ordered from this pod's member, kept beside the flags file until it is done. */
export interface RecoveryOrder {
  id: string;
  from: string;
  fromId: string;
  clusterId: string;
  force: boolean;
  orderedAt: string;
  quorumLostSince: string | null;
  committedIndex: number;
  raftTerm: number;
  removed: RecoveryRecord['removed'];
  /** The member list the gates were checked against: the re-check's list when no other can be read. */
  members?: Member[];
  /** `ordered` → `held` (etcd stopped) → `started` (once-flag written, hold lifted) → `done` (record written). */
  step: 'ordered' | 'held' | 'started' | 'done';
}
