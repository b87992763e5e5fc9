/**
 * How the agent and `prepare` reach etcd, from the one configuration: the same endpoints, TLS
 * files, credentials and key prefix, so both talk to etcd the same way.
 */
import type { Config } from '../config/config';
import type { Logger } from '../observability/logger';

/** How the agent reaches etcd: endpoints, TLS and credentials (docs/api.md §2). */
export interface EtcdConnectionOptions {
  endpoints: string[];
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  username?: string;
  passwordFile?: string;
  /** Longest single attempt of a cluster-wide call; the call's deadline caps it further. */
  attemptTimeoutMs?: number;
  /** ETCD_AGENT_KEY_PREFIX: the linearizable barrier read of `listMembers` reads a key below it. */
  keyPrefix?: string;
  /**
   * Peer URLs whose listener serves the member list (`GET <peer URL>/members`): this pod's own
   * member's, so that a learner's agent finds the voters (etcd 3.4 refuses a learner MemberList).
   */
  peerURLs?: string[];
  /** Where a rejected or reloaded TLS rotation is logged. */
  logger?: Logger;
  /** How often the TLS files are looked at for a rotation (default 1000 ms). */
  credentialsReloadMs?: number;
}

/** The cluster client's options from the agent's configuration. */
export function connectionOptions(config: Config, logger: Logger): EtcdConnectionOptions {
  return {
    endpoints: config.endpoints,
    keyPrefix: config.keyPrefix,
    caFile: config.etcdCaFile,
    certFile: config.etcdCertFile,
    keyFile: config.etcdKeyFile,
    username: config.etcdUsername,
    passwordFile: config.etcdPasswordFile,
    // The CA, certificate and key are re-read when their files change (etcd/credentials.ts).
    logger,
    peerURLs: config.localPeerUrl === undefined ? [] : [config.localPeerUrl],
  };
}
