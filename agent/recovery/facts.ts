/**
 * What the recovery's decision and plan are made from, read afresh for each: a health observation,
 * the member list, each member's log, and the cluster's recovery record.
 *
 * Without a quorum no member list can be read through one, so the list is the last one read, else
 * the one a member serves its peers (this agent's own member first, then those the order names),
 * else the order's own. A member's log is its etcd's Status, else its data directory, read here for
 * this agent's own member and through its agent (GET /v1/recovery/local) for the others.
 */
import * as path from 'node:path';
import type { Config } from '../config/config';
import { RECOVERY_RECORD_READ_MS } from '../config/timings';
import type { EtcdCluster } from '../etcd/cluster-client';
import { fetchPeerMembers } from '../etcd/peer-members';
import { readRecoveryRecord } from '../etcd/recovery-record';
import { readDataDir } from '../etcd-data/data-dir';
import { readWalState } from '../etcd-data/wal-state';
import type { HealthObserver } from '../health/observer';
import { Deadline } from '../lib/deadline';
import { getJson } from '../lib/http-request';
import type { PrepareOptions } from '../prepare/options';
import type { LocalRecoveryState, MemberLogState, RecoveryOrder, RecoveryRecord } from '../proto/recovery';
import type { Member, MemberStatus } from '../proto/types';
import type { RecoveryFacts } from './decision';

/** Deadline of another agent's GET /v1/recovery/local: a plan waits on its slowest member; an answer is a Status and a WAL read. */
const LOCAL_ASK_MS = 1500;
/** A peer's member list gets this many status timeouts: unlike a Status, it opens a new HTTP(S) connection each time. */
const PEER_LIST_STATUS_TIMEOUTS = 2;

/** The facts of the decision and the plan, with the member list they were read from. */
export type CurrentFacts = Omit<RecoveryFacts, 'request'> & { list: Member[] };

/** What the reader reads with; `prepare` is absent where the agent has no data directory and start script. */
export interface FactsDeps {
  config: Config;
  cluster: EtcdCluster;
  health: HealthObserver;
  prepare?: PrepareOptions;
}

/** Reads the recovery's facts (see the module comment). */
export class FactsReader {
  constructor(private readonly deps: FactsDeps) {}

  /** A fresh observation, each member's log, the record; with `order`, its members are asked too and its list is the last resort. */
  async read(order?: RecoveryOrder): Promise<CurrentFacts> {
    const { health, config, cluster } = this.deps;
    const answer = await health.cluster();
    const list = health.lastMembers() ?? (await this.peerListOf(order)) ?? order?.members ?? [];
    const q = answer.health.quorum;
    const counted = q !== null && q.voters > 0;
    const voterCount = list.filter((m) => !m.isLearner).length;
    const quorum = counted
      ? { voters: q.voters, answering: q.healthyVoters, required: q.required, hasQuorum: q.hasQuorum }
      : list.length === 0
        ? null
        : { voters: voterCount, answering: 0, required: Math.floor(voterCount / 2) + 1, hasQuorum: false };
    const members = await Promise.all(list.map((m) => this.logStateOf(m)));
    let record: RecoveryRecord | undefined;
    if (quorum?.hasQuorum === true)
      record = await readRecoveryRecord(cluster, config.keyPrefix, Deadline.in(RECOVERY_RECORD_READ_MS)).catch(() => undefined);
    return {
      self: config.memberName,
      nowMs: Date.now(),
      lostSinceMs: health.quorumLostSince(),
      minLossSeconds: config.recoveryMinLossSeconds,
      quorum,
      members,
      ...(record === undefined ? {} : { record }),
      list,
    };
  }

  /** What this agent's own data directory holds, for GET /v1/recovery/local and its own member's log. */
  readOwnDataDir(): LocalRecoveryState['dataDir'] {
    const dataDir = this.deps.prepare?.dataDir;
    if (dataDir === undefined) return { kind: 'not-configured' };
    try {
      const state = readDataDir(dataDir);
      if (state.kind !== 'member') return state.kind === 'empty' ? { kind: 'empty' } : { kind: 'unusable', reason: state.reason };
      const wal = readWalState(dataDir);
      if (wal === undefined) return { kind: 'unusable', reason: 'its newest WAL segment does not read as a WAL' };
      return {
        kind: 'member',
        memberId: wal.memberId,
        clusterId: wal.clusterId,
        raftTerm: wal.term,
        committedIndex: wal.commit,
        lastIndex: wal.lastIndex,
        segment: path.basename(wal.segment),
      };
    } catch (err) {
      return { kind: 'unreadable', reason: err instanceof Error ? err.message : String(err) };
    }
  }

  /** `http://<host of the member's peer URL>:<this agent's port>`, as prepare reaches its peers. */
  agentUrlOf(m: Member | undefined): string | null {
    const peer = m?.peerURLs[0];
    if (peer === undefined) return null;
    const host = new URL(peer).host.replace(/:\d+$/, '');
    return `http://${host}:${this.deps.config.listen.port}`;
  }

  /** The member list a member's etcd serves its peers (`GET <peer URL>/members`), even without a quorum. */
  peerMembers(peerURL: string, timeoutMs: number): Promise<Member[]> {
    const { config } = this.deps;
    return fetchPeerMembers(peerURL, timeoutMs, { caFile: config.etcdCaFile, certFile: config.etcdCertFile, keyFile: config.etcdKeyFile });
  }

  /**
   * The first member list a peer listener serves: this agent's own member's, then those of the
   * members `order` names; undefined when none answers.
   */
  private async peerListOf(order: RecoveryOrder | undefined): Promise<Member[] | undefined> {
    const { config } = this.deps;
    const ownPeer = this.deps.prepare?.self.peerURL ?? config.localPeerUrl;
    const peers = [...new Set([...(ownPeer === undefined ? [] : [ownPeer]), ...(order?.members ?? []).flatMap((m) => m.peerURLs)])];
    if (peers.length === 0) return undefined;
    const timeoutMs = config.statusTimeoutMs * PEER_LIST_STATUS_TIMEOUTS;
    return Promise.any(peers.map((u) => this.peerMembers(u, timeoutMs))).catch(() => undefined);
  }

  /** One member's log: its Status, else its data directory through its agent (this agent's own, read here). */
  private async logStateOf(m: Member): Promise<MemberLogState> {
    const { cluster, config } = this.deps;
    const errors: string[] = [];
    const base = { name: m.name, id: m.id, lastIndex: null };
    const own = m.name === config.memberName;
    const url = own ? config.localEndpoint : m.clientURLs[0];
    if (url !== undefined) {
      try {
        const s: MemberStatus = await cluster.memberStatus(url, config.statusTimeoutMs);
        if (s.memberId === m.id) {
          return {
            ...base,
            source: 'etcd',
            clusterId: s.clusterId ?? null,
            raftTerm: s.raftTerm,
            committedIndex: s.raftIndex,
            appliedIndex: s.raftAppliedIndex,
            isLearner: s.isLearner,
            errors,
          };
        }
        errors.push(`${url} answers as member ${s.memberId}`);
      } catch (err) {
        errors.push(`etcd: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    const dir = own
      ? this.readOwnDataDir()
      : await this.askAgent(m).then(
          (l) => l.dataDir,
          (err: unknown) => ({ kind: 'unreadable' as const, reason: `agent: ${err instanceof Error ? err.message : String(err)}` }),
        );
    if (dir.kind === 'member' && dir.memberId === m.id) {
      return {
        ...base,
        source: 'data-dir',
        clusterId: dir.clusterId,
        raftTerm: dir.raftTerm,
        committedIndex: dir.committedIndex,
        appliedIndex: null,
        lastIndex: dir.lastIndex,
        isLearner: m.isLearner,
        errors,
      };
    }
    errors.push(
      dir.kind === 'member'
        ? `its data directory holds member ${dir.memberId}`
        : `data directory: ${dir.kind}${'reason' in dir && dir.reason !== undefined ? ` (${dir.reason})` : ''}`,
    );
    return {
      ...base,
      source: 'none',
      clusterId: null,
      raftTerm: null,
      committedIndex: null,
      appliedIndex: null,
      isLearner: m.isLearner,
      errors,
    };
  }

  /** Another member's state, asked of its agent (GET /v1/recovery/local); rejects when that agent answers as another member. */
  private async askAgent(m: Member): Promise<LocalRecoveryState> {
    const base = this.agentUrlOf(m);
    if (base === null) throw new Error('no peer URL to find its agent by');
    const body = (await getJson(`${base}/v1/recovery/local`, LOCAL_ASK_MS)) as LocalRecoveryState;
    if (body.name !== m.name) throw new Error(`${base} answers as ${String(body.name)}`);
    return body;
  }
}
