/**
 * A KubeBlocks story: kubeStory (story.ts) in a namespace at Pod Security "baseline" (KubeBlocks
 * adds kbagent's containers without the "restricted" settings), writing through the Component's
 * client Service, and one Cluster `etcd` of the definition, driven through KubeBlocks' API as a user
 * drives it, with its Cluster, Component and OpsRequest records and every agent's log kept as
 * evidence. Its methods wait for what KubeBlocks and etcd report; the stories judge.
 */
import { eventually } from '../../helpers/eventually';
import { mustKubectl } from './commands';
import { freePVs, waitForMembers } from './kit';
import { AgentLogs, ClusterWatch, clusterManifest, installKubeBlocks, kbPodNames, opsManifest } from './kubeblocks';
import { kubeStory, type Story } from './story';

/** The Cluster of every KubeBlocks story, and its one Component. */
const CLUSTER = 'etcd';
const COMPONENT = `${CLUSTER}-etcd`;

/** What a KubeBlocks story works with. */
export class KubeBlocksCluster {
  readonly name = CLUSTER;
  readonly component = COMPONENT;
  readonly watch: ClusterWatch;
  readonly logs: AgentLogs;

  constructor(readonly s: Story) {
    this.watch = new ClusterWatch(s.api, s.namespace);
    this.logs = new AgentLogs(s.pods, s.namespace).start();
    s.evidence.set('kubeblocks', () => this.watch.records);
    s.evidence.set('agentLogs', () => this.logs.lines);
  }

  /** The names of the Component's first `n` pods. */
  names(n: number): string[] {
    return kbPodNames(CLUSTER, n);
  }

  /** Applies the Cluster (`replicas` pods of etcd `serviceVersion`, `env` for every container) and waits until its members are healthy voters and it is Running and Available. */
  async create(replicas: number, serviceVersion: string, env: Array<{ name: string; value: string }> = []): Promise<void> {
    this.s.step(`create the Cluster (${replicas}, etcd ${serviceVersion})`);
    await mustKubectl(['apply', '-f', '-'], { input: clusterManifest(CLUSTER, this.s.namespace, replicas, serviceVersion, env) });
    await this.members(replicas);
    // KubeBlocks refuses an OpsRequest while the Cluster is Creating (ValidateFailed), which it can
    // still be with every member a Ready voter: a user waits for Running, and so does every story.
    await this.runningAndAvailable();
  }

  /** Waits until exactly the first `n` pods are Ready and etcd has exactly them as voters (kit.ts waitForMembers). */
  async members(n: number): Promise<void> {
    // kbagent is KubeBlocks' container in every pod: its probes are KubeBlocks'.
    await waitForMembers(this.s, this.names(n), { othersContainers: ['kbagent'] });
  }

  /** Applies an OpsRequest and waits until it Succeeds; one that fails or is aborted fails the story at once. */
  async runOps(name: string, type: string, spec: object): Promise<{ started: number; ended: number }> {
    const started = Date.now();
    this.s.step(`OpsRequest ${name} (${type})`);
    await mustKubectl(['apply', '-f', '-'], { input: opsManifest(name, this.s.namespace, CLUSTER, type, spec) });
    const phase = await eventually(
      () => {
        const p = this.watch.latest('OpsRequest', name)?.phase;
        if (p === 'Succeed' || p === 'Failed' || p === 'Aborted' || p === 'Cancelled') return p;
        throw new Error(`OpsRequest ${name} is ${p ?? 'not seen yet'}`);
      },
      { within: 300_000, every: 500 },
    );
    expect({ ops: name, phase }).toEqual({ ops: name, phase: 'Succeed' });
    this.s.step(`OpsRequest ${name} Succeed`);
    return { started, ended: Date.now() };
  }

  /** Waits until the Cluster is Running and the Component Running and Available. */
  async runningAndAvailable(): Promise<void> {
    await eventually(
      () => {
        const cluster = this.watch.latest('Cluster', CLUSTER)?.phase;
        const component = this.watch.latest('Component', COMPONENT);
        if (cluster !== 'Running' || component?.phase !== 'Running' || component.available !== 'True')
          throw new Error(`Cluster ${cluster ?? '?'}, Component ${component?.phase ?? '?'} (Available ${component?.available ?? '?'})`);
      },
      { within: 300_000, every: 500 },
    );
  }

  /**
   * Running stays so: from now until every pod's agent has answered `probes` more availableProbe
   * calls (kbagent's, every 5 s: 8 of them outlast KubeBlocks' 30 s window of reports), no Cluster
   * phase but Running and no Component state but Running and Available was recorded.
   */
  async staysRunning(pods: string[], probes = 8): Promise<void> {
    const since = Date.now();
    const probed = (pod: string): number =>
      this.logs.requests('GET', '/v1/available').filter((l) => l.pod === pod && Date.parse(String(l.line.timestamp)) >= since).length;
    await eventually(
      () => {
        const short = pods.filter((p) => probed(p) < probes).map((p) => `${p}: ${probed(p)}`);
        if (short.length > 0) throw new Error(`waiting for ${probes} availableProbe calls per pod: ${short.join(', ')}`);
      },
      { within: 180_000, every: 1000 },
    );
    expect(this.watch.since('Cluster', CLUSTER, since).filter((r) => r.phase !== 'Running')).toEqual([]);
    expect(this.watch.since('Component', COMPONENT, since).filter((r) => r.phase !== 'Running' || r.available !== 'True')).toEqual([]);
    this.s.step(`Running and Available while each pod answered ${probes} availableProbe calls`);
  }

  /**
   * etcd's leader as every pod of `pods` sees it now: the pod whose member id they all name, from
   * Status calls sent after this one began (an answer asked for before it may predate the change
   * the caller just saw complete, such as a switchover).
   */
  async leaderNow(pods: string[]): Promise<string> {
    const since = Date.now();
    return eventually(
      () => {
        const recent = pods.map((p) =>
          [...this.s.etcd.records].reverse().find((r) => r.pod === p && r.leader !== undefined && r.sentAt >= since),
        );
        const leaders = new Set(recent.map((r) => r?.leader));
        if (recent.some((r) => r === undefined) || leaders.size !== 1) throw new Error(`no single leader yet: ${[...leaders].join(', ')}`);
        const leader = recent.find((r) => r?.memberId === [...leaders][0]);
        if (leader === undefined) throw new Error(`the leader ${[...leaders][0]} is none of ${pods.join(', ')}`);
        return leader.pod;
      },
      { within: 60_000, every: 300 },
    );
  }

  /** Waits until the pods carry KubeBlocks' role labels as etcd says: `leader` on `leader`, `follower` on the others. */
  async rolesFollow(pods: string[], leader: string): Promise<void> {
    await eventually(
      async () => {
        const labels = await Promise.all(
          pods.map(async (p) => [
            p,
            await mustKubectl(['get', 'pod', p, '-n', this.s.namespace, '-o', 'jsonpath={.metadata.labels.kubeblocks\\.io/role}']),
          ]),
        );
        expect(Object.fromEntries(labels)).toEqual(Object.fromEntries(pods.map((p) => [p, p === leader ? 'leader' : 'follower'])));
      },
      { within: 120_000, every: 1000 },
    );
  }

  /** etcd's member list as the newest record that has one gives it, by name, learners marked. */
  membersNow(): string[] {
    const last = [...this.s.etcd.records].reverse().find((r) => r.members !== undefined);
    return (last?.members ?? []).map((m) => `${m.name}${m.isLearner ? ' (learner)' : ''}`).sort();
  }

  stop(): void {
    this.watch.stop();
    this.logs.stop();
  }
}

/** A story of one KubeBlocks Cluster: KubeBlocks' controller running, free PVs, the Cluster's records kept. */
export function kubeBlocksStory(title: string, namespace: string, body: (kb: KubeBlocksCluster, s: Story) => Promise<void>): void {
  kubeStory(
    title,
    namespace,
    async (s) => {
      await installKubeBlocks();
      await freePVs();
      const kb = new KubeBlocksCluster(s);
      try {
        await body(kb, s);
      } finally {
        kb.stop();
      }
    },
    { podSecurity: 'baseline', clientService: `${COMPONENT}-client`, owners: 'clusters.apps.kubeblocks.io' },
  );
}
