/**
 * etcd's answers → the agent's shapes, and member ids between etcd's wire form (a decimal uint64)
 * and the lowercase hex etcdctl prints. Pure: no call to etcd is made here.
 */
import type { IAlarmResponse, IMember, IMemberListResponse, IStatusResponse } from 'etcd3';
import type { Member, MemberList, MemberStatus } from '../proto/types';

/** An etcd alarm as `etcdctl alarm list` shows it. */
export interface Alarm {
  memberId: string;
  alarm: string;
}

/** `ID` as etcd sends it (a decimal uint64 string) → lowercase hex as etcdctl prints it. */
export function hexId(id: string | number | bigint): string {
  return BigInt(id).toString(16);
}

/** Lowercase hex id → the decimal string etcd3 expects on the wire. */
export function wireId(hex: string): string {
  return BigInt(`0x${hex}`).toString(10);
}

/** etcd's member → the agent's member shape. */
export function toMember(m: IMember): Member {
  return {
    id: hexId(m.ID),
    name: m.name,
    peerURLs: m.peerURLs ?? [],
    clientURLs: m.clientURLs ?? [],
    isLearner: m.isLearner === true,
    // etcd reports an added-but-never-started member with no name and no client URLs.
    started: m.name !== '',
  };
}

/** etcd's MemberList answer → the agent's member list, ids in hex. */
export function toMemberList(res: IMemberListResponse): MemberList {
  return {
    clusterId: hexId(res.header.cluster_id),
    answeredBy: hexId(res.header.member_id),
    raftTerm: Number(res.header.raft_term),
    members: res.members.map(toMember),
  };
}

/** etcd's Maintenance.Status answer → the agent's member status; `latencyMs` is how long the call took. */
export function toMemberStatus(res: IStatusResponse, latencyMs: number): MemberStatus {
  return {
    memberId: hexId(res.header.member_id),
    clusterId: hexId(res.header.cluster_id),
    leaderId: hexId(res.leader),
    raftTerm: Number(res.raftTerm),
    raftIndex: Number(res.raftIndex),
    raftAppliedIndex: Number(res.raftAppliedIndex),
    dbSizeBytes: Number(res.dbSize),
    // etcd 3.4 and later report it; an older member (or a field the client dropped) reads as all in use.
    dbSizeInUseBytes: res.dbSizeInUse === undefined ? Number(res.dbSize) : Number(res.dbSizeInUse),
    revision: Number(res.header.revision),
    isLearner: res.isLearner === true,
    version: res.version,
    errors: res.errors ?? [],
    latencyMs,
  };
}

/** etcd's alarm list → alarms with hex member ids and upper-case names (NOSPACE, CORRUPT). */
export function toAlarms(res: IAlarmResponse): Alarm[] {
  return res.alarms.map((a) => ({ memberId: hexId(a.memberID), alarm: String(a.alarm).toUpperCase() }));
}
