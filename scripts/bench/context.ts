/**
 * What every measurement module receives from run.ts: the cluster, where to
 * put its rows and notes, and whether this is a short (BENCH_QUICK) run.
 */
import type { LocalEtcdCluster } from '../local-cluster';
import type { AgentOptions, AgentProcess } from './agent-process';
import type { Row } from './report';

/** Shared state of one bench run. */
export interface BenchContext {
  quick: boolean;
  /** The node binary the agents (and the bare Node server beside them) run on, and its version. */
  node: string;
  nodeVersion: string;
  /** Scratch directory for agent logs, profiles and snapshots (removed at the end unless BENCH_KEEP). */
  workDir: string;
  rows: Row[];
  notes: string[];
  /** Progress on stderr (the table goes to stdout). */
  log(message: string): void;
}

/** A 3-member cluster with the agent of its first member's pod, the set-up most measurements share. */
export interface ClusterUnderTest {
  cluster: LocalEtcdCluster;
  /** The sidecar of etcd-0 (local endpoint etcd-0, all three endpoints configured). */
  agent: AgentProcess;
  endpoints: string[];
}

/** Options of another agent set up like the cluster's own sidecar: every endpoint, etcd-0 as its local member. */
export function sidecarOptions(
  ctx: BenchContext,
  cut: Pick<ClusterUnderTest, 'endpoints' | 'cluster'>,
  label: string,
  extra: Partial<AgentOptions> = {},
): AgentOptions {
  return {
    endpoints: cut.endpoints,
    localEndpoint: cut.endpoints[0],
    memberName: cut.cluster.members[0].name,
    workDir: ctx.workDir,
    label,
    node: ctx.node,
    ...extra,
  };
}

/** `full` normally, `quick` under BENCH_QUICK=1. */
export function pick<T>(ctx: BenchContext, full: T, quick: T): T {
  return ctx.quick ? quick : full;
}
