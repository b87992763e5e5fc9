/**
 * What the lazily loaded etcd3 chunk exports (etcd3-module.ts, scripts/bundle.ts): etcd3 itself,
 * and the two pieces of its gRPC library the agent needs besides it, from the same copy etcd3 uses:
 * per-call credentials that carry an etcd auth token (see status-token.ts). Loading it also makes
 * etcd3 drop gRPC channels without a timer that holds the process (prompt-channel-close.ts).
 */
import { closeChannelsPromptly } from './prompt-channel-close';

closeChannelsPromptly();

export * from 'etcd3';
export { credentials as grpcCredentials, Metadata as GrpcMetadata } from '@grpc/grpc-js';
