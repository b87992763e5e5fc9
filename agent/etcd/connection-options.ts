/**
 * How the agent and `prepare` reach etcd, from the one configuration: the same endpoints, TLS
 * files, credentials and key prefix, so both talk to etcd the same way.
 */
import type { Config } from '../config';
import type { Logger } from '../observability/logger';
import type { EtcdConnectionOptions } from './cluster-client';

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
