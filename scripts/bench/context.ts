/**
 * What every measurement module receives from run.ts: the cluster, where to
 * put its rows and notes, and whether this is a short (BENCH_QUICK) run.
 */
import type { LocalEtcdCluster } from '../local-cluster';
import type { AgentProcess } from './agent-process';
import type { Row } from './report';

/** Shared state of one bench run. */
export interface BenchContext {
  quick: boolean;
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

/** `full` normally, `quick` under BENCH_QUICK=1. */
export function pick<T>(ctx: BenchContext, full: T, quick: T): T {
  return ctx.quick ? quick : full;
}
