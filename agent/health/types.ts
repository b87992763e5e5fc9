/**
 * What a health observation saw and what it classifies into: the bodies of `/v1/health` and
 * `/v1/health/local` (docs/api.md §4), without the request's own fields. Shapes only, no logic.
 */
import type { Alarm } from '../etcd/wire';
import type { Role } from '../membership/leader';
import type { MaintenanceView } from '../proto/maintenance';
import type { Member, MemberStatus, OperationRecord } from '../proto/types';

/** The contract's health states. */
export type HealthStatus = 'healthy' | 'degraded' | 'unavailable' | 'unknown';

/** One status call: the client URL asked, and the answer or why there was none. */
export interface StatusProbe {
  url: string;
  status?: MemberStatus;
  error?: string;
  /**
   * No answer only because the call's time ran out (or none was left to send it), with no refusal:
   * a busy member, or this agent held up, as much as a member down.
   */
  outOfTime?: true;
}

/** Everything one observation saw: the input of `classify`. */
export interface ObservedFacts {
  /** The member list: read in this observation (`fresh`), else the last one read (`readAt`), else none. */
  memberList?: { members: Member[]; fresh: boolean; readAt: string };
  /** Why the member list could not be read in this observation. */
  memberListError?: string;
  probes: StatusProbe[];
  /** The alarm list; undefined when it could not be read (`alarmsError`). */
  alarms?: Alarm[];
  alarmsError?: string;
  /** Operation records; undefined when not asked for or not read (`operationsError`). */
  operations?: OperationRecord[];
  operationsError?: string;
  /** The line with which this pod's etcd container refused to start its etcd (health/start-note.ts), and that member's name. */
  startNote?: { member: string; text: string };
  /** The defragmentation this agent is running, if any (POST /v1/maintenance/defragment). */
  maintenance?: MaintenanceView;
}

/** One member as `/v1/health` shows it; the numbers are null when it did not answer. */
export interface MemberHealth {
  id: string;
  name: string;
  isLearner: boolean;
  started: boolean;
  reachable: boolean;
  isLeader: boolean;
  raftTerm: number | null;
  raftIndex: number | null;
  raftAppliedIndex: number | null;
  dbSizeBytes: number | null;
  dbSizeInUseBytes: number | null;
  latencyMs: number | null;
  errors: string[];
}

/** Quorum counts of one observation. */
export interface QuorumHealth {
  voters: number;
  healthyVoters: number;
  required: number;
  hasQuorum: boolean;
  faultTolerance: number;
}

/** An alarm raised in the cluster, with the name of the member it is about. */
export interface AlarmHealth {
  memberId: string;
  name: string;
  alarm: string;
}

/** The body of `/v1/health` without `requestId`, `observedAt` and `ageMs`. */
export interface ClusterHealth {
  status: HealthStatus;
  /** Null only for `unknown`. */
  quorum: QuorumHealth | null;
  leader: { id: string; name: string } | null;
  members: MemberHealth[];
  alarms: AlarmHealth[];
  errors: string[];
  expected?: { missing: string[]; unexpected: string[] };
  operations?: OperationRecord[];
  /** The defragmentation this agent is running (POST /v1/maintenance/defragment); absent when none. */
  maintenance?: MaintenanceView;
}

/** This pod's role as the observation reads it (role.ts), or why there is none, as a fact. */
export type RoleReading =
  | { kind: 'role'; role: Role }
  | { kind: 'not-answering'; endpoint: string; error: string }
  | { kind: 'not-listed'; memberId: string }
  | { kind: 'not-observed' };

/** `/v1/health/local`: this pod's member, its role, and whether it is ready (200) or not (503). */
export interface LocalHealth {
  ready: boolean;
  member: MemberHealth & {
    role: Role | null;
    /** In the observed member list (true), not in it (false), or no list observed, or not answering and not found by name (null). */
    listed: boolean | null;
  };
  /** The role as roleProbe and GET /v1/role read it (role.ts), or why there is none. */
  reading: RoleReading;
}
