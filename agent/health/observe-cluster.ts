/**
 * What one health observation reads, all calls in parallel and each bounded by
 * `ETCD_AGENT_STATUS_TIMEOUT_MS` and by the observation's budget (a little under
 * `ETCD_AGENT_HEALTH_MAX_AGE_MS`):
 * - the member list (through the configured endpoints);
 * - a Status call to every member's own client URL (its first one). The URLs come from the last
 *   member list read, so the calls start beside the list read instead of after it; members the new
 *   list adds are asked as soon as it arrives. Before any list was read, the list comes first;
 * - the alarm list, and the operation records when the membership lock is wired in.
 * So an observation costs at most one Status call per member, whatever the request rate; only when
 * fewer voters than a quorum answered are the silent ones asked once more, in what is left of the
 * budget (reask.ts), so that one slow round does not read as a quorum lost.
 *
 * When the configured endpoints cannot give the list (down, or a learner, where etcd 3.4 refuses
 * MemberList), it is read at a voter that answered its Status call, as that voter has applied it
 * (no quorum needed: an election or a lost quorum does not stop it). When no one gives it, the last
 * one read only directs the Status calls and counts the quorum: `classify` never calls that
 * `healthy` (see classify.ts). When none was ever read (an agent started while the quorum is lost),
 * a member's own copy, read without a quorum, does that instead. Once every known member has failed
 * its Status call the observation ends without waiting for the other reads: the answer is
 * `unavailable` whatever they say.
 */
import { Deadline } from '../lib/deadline';
import type { Config } from '../config/config';
import type { EtcdCluster } from '../etcd/cluster-client';
import type { MaintenanceView } from '../proto/maintenance';
import type { Member, OperationRecord } from '../proto/types';
import { canonicalUrl } from '../proto/urls';
import { urlsToAskAgain } from './reask';
import { settle, type Settled } from './settle';
import type { ObservedFacts, StatusProbe } from './types';

/** A member list an observation read, and when (ISO time). */
export interface ReadList {
  members: Member[];
  readAt: string;
}

/** What one observation reads from, and how it asks. */
export interface ObservationReads {
  cluster: Pick<EtcdCluster, 'listMembers' | 'memberListAt' | 'localMemberList' | 'alarms'>;
  config: Pick<Config, 'endpoints' | 'memberName'>;
  /** The membership lock's records (GET /v1/operations), when the lock is wired in. */
  operations?: (deadline: Deadline) => Promise<OperationRecord[]>;
  /** The note this pod's etcd container left when it refused to start etcd, if any. */
  startNote?: () => Promise<string | undefined>;
  /** The defragmentation this agent runs now, if any. */
  maintenance?: () => MaintenanceView | undefined;
  /** The last member list any observation read, as this one starts; undefined before the first. */
  known: ReadList | undefined;
  /** Keeps a list this observation has just read as the last one read, for the observations after it. */
  remember: (members: Member[]) => ReadList;
  /** One Status call, within what is left of the budget, never throwing. */
  probe: (url: string) => Promise<StatusProbe>;
  /** Milliseconds a call started now may take. */
  callMs: () => number;
}

/** The facts of one observation (see the module comment). */
export async function gatherFacts(reads: ObservationReads): Promise<ObservedFacts> {
  const { cluster, operations, config, startNote, known, remember, probe, callMs } = reads;
  const probes = new Map<string, Promise<StatusProbe>>();
  const ask = (url: string | undefined): void => {
    if (url === undefined || probes.has(canonicalUrl(url))) return;
    probes.set(canonicalUrl(url), probe(url));
  };
  known?.members.forEach((m) => ask(m.clientURLs[0]));

  // When every known member has failed its status call, the answer is `unavailable` whatever
  // the list says: do not wait for reads that retry until their deadline.
  const silent = known === undefined ? undefined : Promise.all(probes.values()).then((ps) => ps.every((p) => p.status === undefined));
  const cut = <T>(read: Promise<Settled<T>>): Promise<Settled<T>> =>
    silent === undefined
      ? read
      : Promise.race([read, silent.then((none) => (none ? { ok: false as const, error: 'not waited for: no member answered' } : read))]);
  const listing = cut(settle((ms) => cluster.listMembers(Deadline.in(ms)), callMs()));
  const alarming = cut(settle((ms) => cluster.alarms(Deadline.in(ms)), callMs()));
  const recording = operations === undefined ? undefined : cut(settle((ms) => operations(Deadline.in(ms)), callMs()));
  const noting = startNote?.().catch(() => undefined);
  // Never read a list yet: a member's own copy, asked beside the list, in case no quorum answers.
  const ownCopy = known === undefined ? settle((ms) => cluster.localMemberList(Deadline.in(ms)), callMs()) : undefined;

  let list = await listing;
  if (!list.ok) {
    // Read it where a voter answers instead, as that voter has applied it (no quorum needed): the
    // configured endpoints may be down, or a learner (etcd 3.4 refuses MemberList on one), or the
    // list may wait for an election. It is asked even when the list read before says too few voters
    // answer: that list may predate members added or removed since, and counting by it could call
    // a quorum lost that is not. With no list known yet, ask the configured endpoints for their
    // status first, to find such a voter.
    if (known === undefined) config.endpoints.forEach(ask);
    const copy = ownCopy === undefined ? undefined : await ownCopy;
    if (copy?.ok === true) copy.value.members.forEach((m) => ask(m.clientURLs[0]));
    const answers = await Promise.all(probes.values());
    const voter = answers.find((p) => p.status !== undefined && !p.status.isLearner);
    if (voter !== undefined) {
      const fallback = await settle((ms) => cluster.memberListAt(voter.url, ms), callMs());
      if (fallback.ok) list = fallback;
    }
  }
  let memberList: ObservedFacts['memberList'];
  if (list.ok) {
    const read = remember(list.value.members);
    list.value.members.forEach((m) => ask(m.clientURLs[0]));
    memberList = { members: list.value.members, fresh: true, readAt: read.readAt };
  } else if (known !== undefined) {
    memberList = { members: known.members, fresh: false, readAt: known.readAt };
  } else if (ownCopy !== undefined) {
    // Never read one, and no quorum to read it through now: a member's own copy (no quorum needed)
    // still says whom to ask and how many voters there are, so "2 of 4 voters" is not "0 of 0".
    // Not `fresh`: it may lag, and classify never calls such an observation healthy.
    const local = await ownCopy;
    if (local.ok) {
      local.value.members.forEach((m) => ask(m.clientURLs[0]));
      memberList = { members: local.value.members, fresh: false, readAt: new Date().toISOString() };
    }
  }
  // Short of a quorum of answers: the silent voters once more, in what is left of the budget (reask.ts).
  for (const url of urlsToAskAgain(memberList?.members, await Promise.all(probes.values()))) {
    probes.set(canonicalUrl(url), probe(url));
  }
  const [answers, alarms, records, note] = await Promise.all([Promise.all(probes.values()), alarming, recording, noting]);
  const maintenance = reads.maintenance?.();
  const facts: ObservedFacts = {
    ...(maintenance === undefined ? {} : { maintenance }),
    memberList,
    probes: answers,
    ...(list.ok ? {} : { memberListError: list.error }),
    ...(alarms.ok ? { alarms: alarms.value } : { alarmsError: alarms.error }),
    ...(records === undefined ? {} : records.ok ? { operations: records.value } : { operationsError: records.error }),
    ...(note === undefined ? {} : { startNote: { member: config.memberName, text: note } }),
  };
  return facts;
}
