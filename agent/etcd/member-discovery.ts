/**
 * What the cluster client learns from each member list: its voters' client URLs become endpoints,
 * its peer URLs places to find the others when no endpoint can answer, and the clients of members
 * that left are closed, so channels to departed members do not pile up and keep reconnecting.
 */
import type { Deadline } from '../lib/deadline';
import type { Member } from '../proto/types';
import type { EtcdConnectionOptions } from './connection-options';
import type { EndpointClients } from './endpoint-clients';
import type { EndpointSet } from './endpoints';
import { fetchPeerMembers } from './peer-members';

/** Longest wait for a peer listener's member list. */
const PEER_LIST_MS = 1000;

/** The members of the last member list, as far as the cluster client needs to know where they are. */
export class MemberDiscovery {
  /** Every client URL a member list has shown, to close the connections of members that left. */
  private readonly everReported = new Set<string>();
  /** Peer URLs of the members of the last member list: where a learner's agent can read the list. */
  private knownPeerURLs: string[] = [];
  /** Client URL of each started member by hex id, from the last member list (to find the leader's endpoint). */
  private clientURLById = new Map<string, string>();

  constructor(
    private readonly options: Pick<EtcdConnectionOptions, 'peerURLs' | 'caFile' | 'certFile' | 'keyFile'>,
    private readonly endpoints: EndpointSet,
    private readonly clients: EndpointClients,
  ) {}

  /** Takes in a member list: its voters' client URLs become endpoints, its peer URLs places to discover from. */
  learn(members: Member[]): void {
    const voters = members.filter((m) => m.started && !m.isLearner);
    this.endpoints.setReported(voters.flatMap((m) => m.clientURLs));
    this.knownPeerURLs = members.flatMap((m) => m.peerURLs);
    this.forgetRemoved(members);
    this.clientURLById = new Map(members.filter((m) => m.clientURLs.length > 0).map((m) => [m.id, m.clientURLs[0]]));
  }

  /** The client URL of the member with hex id `id` in the last member list, if it reported one. */
  clientURLOf(id: string): string | undefined {
    return this.clientURLById.get(id);
  }

  /**
   * Reads the member list at a peer listener (this pod's member's, then those of the last list)
   * and adds the client URLs of its started members to the endpoints; true when that added any.
   */
  async discover(deadline: Deadline): Promise<boolean> {
    const peers = [...new Set([...(this.options.peerURLs ?? []), ...this.knownPeerURLs])];
    if (peers.length === 0) return false;
    const ms = Math.min(PEER_LIST_MS, deadline.remainingMs());
    const tls = { caFile: this.options.caFile, certFile: this.options.certFile, keyFile: this.options.keyFile };
    let members: Member[];
    try {
      members = await Promise.any(peers.map((url) => fetchPeerMembers(url, ms, tls)));
    } catch {
      return false;
    }
    const before = new Set(this.endpoints.ordered());
    this.learn(members);
    return this.endpoints.ordered().some((url) => !before.has(url));
  }

  /**
   * Closes the connections to client URLs that a member used to report and no member reports now
   * (a removed member), so channels to departed members do not pile up and keep reconnecting.
   */
  private forgetRemoved(members: Member[]): void {
    const now = new Set(members.flatMap((m) => m.clientURLs));
    for (const url of this.everReported) {
      if (now.has(url) || this.endpoints.isConfigured(url)) continue;
      this.everReported.delete(url);
      this.clients.drop(url);
      this.endpoints.forget(url);
    }
    for (const url of now) this.everReported.add(url);
  }
}
