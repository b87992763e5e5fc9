/**
 * Wire shapes of the agent's HTTP API (docs/api.md §3, §4). These types are what
 * controllers and people with curl see; a change here is a breaking change.
 */

/** One etcd member as the agent shows it; `id` is lowercase hex as `etcdctl` prints it. */
export interface Member {
  id: string;
  name: string;
  peerURLs: string[];
  clientURLs: string[];
  isLearner: boolean;
  /** False while etcd reports the member as unstarted (its name is then empty). */
  started: boolean;
}

/** A linearizable read of the member list. */
export interface MemberList {
  /** Cluster id in lowercase hex. */
  clusterId: string;
  /** Id (hex) of the member that answered the read. */
  answeredBy: string;
  /** Raft term reported in the response header. */
  raftTerm: number;
  members: Member[];
}

/** Counts shown as `cluster` in every membership answer. */
export interface ClusterSummary {
  id: string;
  members: number;
  voters: number;
  learners: number;
}

/** What one member's own endpoint said about itself (Maintenance.Status). */
export interface MemberStatus {
  /** Hex id of the member that answered. */
  memberId: string;
  /** Hex id of the cluster it says it belongs to (absent in hand-made fixtures). */
  clusterId?: string;
  /** Hex id of the leader as this member sees it; "0" when it knows none. */
  leaderId: string;
  raftTerm: number;
  raftIndex: number;
  raftAppliedIndex: number;
  /** The database file's size (etcd's `dbSize`): what the backend quota and NOSPACE measure. */
  dbSizeBytes: number;
  /** The part of the file in use (etcd's `dbSizeInUse`, 3.4 and later); the rest is free pages a defragmentation gives back. */
  dbSizeInUseBytes: number;
  /** The key-value store's revision when the member answered (its response header). */
  revision: number;
  isLearner: boolean;
  version: string;
  /** Errors the member reports about itself (e.g. "NOSPACE" alarms seen by it). */
  errors: string[];
  latencyMs: number;
}

/** A member-naming request body: by name (with optional peer URLs) or by id. */
export interface MemberRef {
  name?: string;
  peerURLs?: string[];
  id?: string;
}

/** The lifecycle actions the agent performs; used in results, metrics and operation records. */
export type ActionName = 'memberJoin' | 'memberLeave' | 'memberPromote' | 'leaderTransfer';

/** What holds the cluster lock: a membership action, or a maintenance run (POST /v1/maintenance/defragment). */
export type OperationAction = ActionName | 'defragment' | 'backup';

/** Outcomes of a successful mutating call (docs/api.md §4). */
export type Outcome =
  'added' | 'in-progress' | 'promoted' | 'already-member' | 'removed' | 'already-absent' | 'transferred' | 'already-leader' | 'not-leader';

/** The phase a joining member has reached. */
export type Phase = 'unstarted' | 'learner' | 'voter';

/** The JSON body of a successful mutating call, without the `requestId` the server adds. */
export interface ActionResult {
  action: ActionName;
  outcome: Outcome;
  complete: boolean;
  phase?: Phase;
  member?: Member;
  cluster: ClusterSummary;
  leaderTransferred: boolean;
  /** For leader transfer: where leadership went, or stays. */
  leader?: { id: string; name: string };
  durationMs: number;
}

/** An in-flight membership change, recorded in etcd under the key prefix (docs/api.md §4 GET /v1/operations). */
export interface OperationRecord {
  id: string;
  action: OperationAction;
  member: { name: string; peerURLs: string[] };
  agent: string;
  startedAt: string;
  step: string;
}
