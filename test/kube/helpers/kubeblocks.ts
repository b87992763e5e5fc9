/**
 * KubeBlocks stories' side of the cluster: KubeBlocks v1.0.2's own controller running
 * (`bash scripts/kube.sh kubeblocks`), the definitions of deploy/ installed as they are, a Cluster and
 * OpsRequests applied as a user applies them, and what the stories record beside the pods and etcd:
 * - every Cluster phase and Component Available condition, from a watch of the API server;
 * - every JSON log line of every agent container, from `kubectl logs -f` of each pod (one follower
 *   per pod uid, restarted when the container restarts), so the calls an agent received are counted
 *   from its own request log, also for pods that are gone since.
 * The stories judge from these records; nothing here decides a verdict.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from '../../helpers/built-agent';
import { eventually } from '../../helpers/eventually';
import { kubeconfig, kubeSh, mustKubectl, mustRun } from './commands';
import type { KubeApi, Watch } from './kube-api';
import type { PodRecord, PodWatch } from './observe';

/** The definitions a user applies, from deploy/ as they are. */
export const DEFINITIONS = [
  'deploy/kubeblocks-componentdefinition.yaml',
  'deploy/kubeblocks-componentversion.yaml',
  'deploy/kubeblocks-opsdefinition-defragment.yaml',
];
/** The ComponentDefinition's name and the container names the stories look at. */
export const COMPONENT_DEFINITION = 'etcd-with-lifecycle-agent';
export const AGENT_CONTAINER = 'etcd-lifecycle-agent';

/** KubeBlocks' controller runs, and the definitions of deploy/ are Available. */
export async function installKubeBlocks(): Promise<void> {
  await kubeSh(['kubeblocks']);
  for (const file of DEFINITIONS) await mustKubectl(['apply', '-f', path.join(ROOT, file)]);
  await eventually(
    async () => {
      const phases = await Promise.all(
        [
          ['componentdefinition', COMPONENT_DEFINITION],
          ['componentversion', COMPONENT_DEFINITION],
          ['opsdefinition', 'etcd-lifecycle-agent-defragment'],
        ].map(
          async ([kind, name]) =>
            `${kind}/${name}: ${(await mustKubectl(['get', kind, name, '-o', 'jsonpath={.status.phase}'])) || 'none'}`,
        ),
      );
      if (phases.some((p) => !p.endsWith(': Available')))
        throw new Error(`waiting for the definitions to be Available: ${phases.join(', ')}`);
    },
    { within: 120_000, every: 1000 },
  );
}

/** A Cluster of one etcd Component of the ComponentDefinition, as a user writes it (`env` goes into every container). */
export function clusterManifest(
  name: string,
  namespace: string,
  replicas: number,
  serviceVersion: string,
  env: Array<{ name: string; value: string }> = [],
): string {
  return JSON.stringify({
    apiVersion: 'apps.kubeblocks.io/v1',
    kind: 'Cluster',
    metadata: { name, namespace },
    spec: {
      terminationPolicy: 'Delete',
      componentSpecs: [
        {
          name: 'etcd',
          componentDef: COMPONENT_DEFINITION,
          serviceVersion,
          replicas,
          ...(env.length === 0 ? {} : { env }),
          volumeClaimTemplates: [{ name: 'data', spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } } }],
        },
      ],
    },
  });
}

/** An OpsRequest named `name` on Cluster `cluster`, of `type`, with `spec` besides. */
export function opsManifest(name: string, namespace: string, cluster: string, type: string, spec: object): string {
  return JSON.stringify({
    apiVersion: 'operations.kubeblocks.io/v1alpha1',
    kind: 'OpsRequest',
    metadata: { name, namespace },
    spec: { clusterName: cluster, type, ...spec },
  });
}

/** The pods of Component `etcd` of Cluster `cluster`, by ordinal. */
export const kbPodNames = (cluster: string, replicas: number): string[] =>
  Array.from({ length: replicas }, (_, i) => `${cluster}-etcd-${i}`);

/** One Cluster phase or Component condition as the watch showed it. */
export interface ClusterRecord {
  at: number;
  kind: 'Cluster' | 'Component' | 'OpsRequest';
  name: string;
  phase?: string;
  /** The Component's Available condition: True, False, or absent. */
  available?: string;
  availableMessage?: string;
}

/** Cluster phases, Component availability and OpsRequest phases of a namespace, as they change. */
export class ClusterWatch {
  readonly records: ClusterRecord[] = [];
  private readonly watches: Watch[];

  constructor(api: KubeApi, namespace: string) {
    const record =
      (kind: ClusterRecord['kind']) => (e: { at: number; object: { metadata: { name: string }; status?: Record<string, unknown> } }) => {
        const status = e.object.status ?? {};
        const available = ((status.conditions ?? []) as Array<{ type: string; status: string; message?: string }>).find(
          (c) => c.type === 'Available',
        );
        this.records.push({
          at: e.at,
          kind,
          name: e.object.metadata.name,
          ...(typeof status.phase === 'string' ? { phase: status.phase } : {}),
          ...(available === undefined ? {} : { available: available.status, availableMessage: available.message }),
        });
      };
    this.watches = [
      api.watch(`/apis/apps.kubeblocks.io/v1/namespaces/${namespace}/clusters`, record('Cluster')),
      api.watch(`/apis/apps.kubeblocks.io/v1/namespaces/${namespace}/components`, record('Component')),
      api.watch(`/apis/operations.kubeblocks.io/v1alpha1/namespaces/${namespace}/opsrequests`, record('OpsRequest')),
    ];
  }

  /** The latest record of `kind` `name`, if any. */
  latest(kind: ClusterRecord['kind'], name: string): ClusterRecord | undefined {
    return this.records.filter((r) => r.kind === kind && r.name === name).at(-1);
  }

  /** The records of `kind` `name` from `since` on. */
  since(kind: ClusterRecord['kind'], name: string, since: number): ClusterRecord[] {
    return this.records.filter((r) => r.kind === kind && r.name === name && r.at >= since);
  }

  stop(): void {
    for (const w of this.watches) w.stop();
  }
}

/** One JSON line an agent container logged, with the pod it came from. */
export interface AgentLogLine {
  pod: string;
  podUid: string;
  line: Record<string, unknown>;
}

/**
 * Follows the agent container's log of every pod of the namespace (`kubectl logs -f`), from the
 * container's start, into `lines`. A follower ends when its container does; the next look starts
 * one again from the new container's start (`--since-time` of the last line seen, so nothing is
 * counted twice).
 */
export class AgentLogs {
  readonly lines: AgentLogLine[] = [];
  private readonly followers = new Map<string, ChildProcess>();
  private readonly lastSeen = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly pods: PodWatch,
    private readonly namespace: string,
  ) {}

  start(): this {
    const tick = (): void => {
      for (const pod of this.pods.current().values()) this.follow(pod);
      if (!this.stopped) this.timer = setTimeout(tick, 500);
    };
    tick();
    return this;
  }

  private follow(pod: PodRecord): void {
    if (this.followers.has(pod.uid) || !pod.containers[AGENT_CONTAINER]?.running) return;
    const since = this.lastSeen.get(pod.uid);
    const child = spawn(
      'kubectl',
      [
        '--kubeconfig',
        kubeconfig(),
        'logs',
        '-f',
        '--timestamps',
        pod.name,
        '-c',
        AGENT_CONTAINER,
        '-n',
        this.namespace,
        ...(since === undefined ? [] : [`--since-time=${since}`]),
      ],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    this.followers.set(pod.uid, child);
    let rest = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      const text = rest + chunk;
      const lines = text.split('\n');
      rest = lines.pop() ?? '';
      for (const l of lines) this.take(pod, l);
    });
    child.once('close', () => {
      if (rest !== '') this.take(pod, rest);
      if (this.followers.get(pod.uid) === child) this.followers.delete(pod.uid);
    });
  }

  private take(pod: PodRecord, raw: string): void {
    const space = raw.indexOf(' ');
    if (space < 0) return;
    const stamp = raw.slice(0, space);
    // --since-time repeats the lines of that very second: only later ones count.
    const last = this.lastSeen.get(pod.uid);
    if (last !== undefined && stamp <= last) return;
    this.lastSeen.set(pod.uid, stamp);
    try {
      const line = JSON.parse(raw.slice(space + 1)) as Record<string, unknown>;
      this.lines.push({ pod: pod.name, podUid: pod.uid, line });
    } catch {
      // Not one of the agent's JSON lines (Node's own warnings): not evidence of a call.
    }
  }

  /** The requests the agents logged for `method path`, in the order they were logged. */
  requests(method: string, path: string): AgentLogLine[] {
    return this.lines.filter((l) => l.line.message === 'request' && l.line.method === method && l.line.path === path);
  }

  /** Stops following; what was read stays. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    for (const child of this.followers.values()) child.kill('SIGTERM');
    this.followers.clear();
  }
}

/** The processes of a pod, from the host: every process in its cgroup (kubelet's cgroupfs layout names the pod uid). */
export function podProcesses(podUid: string): Array<{ pid: number; command: string }> {
  const found: Array<{ pid: number; command: string }> = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!fs.readFileSync(`/proc/${entry}/cgroup`, 'utf8').includes(`pod${podUid}`)) continue;
      const command = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
      found.push({ pid: Number(entry), command });
    } catch {
      // Gone while it was read.
    }
  }
  return found;
}

/** The pid of the etcd server of a pod (its binary, not the start program that runs it). */
export function etcdPid(podUid: string): number {
  const etcd = podProcesses(podUid).filter((p) => p.command.startsWith('/usr/local/bin/etcd '));
  if (etcd.length !== 1) throw new Error(`pod ${podUid} has ${etcd.length} etcd processes: ${JSON.stringify(podProcesses(podUid))}`);
  return etcd[0].pid;
}

/** `nsenter -t <a process of the pod> -n CMD…`: CMD in the pod's network namespace. */
export async function inPodNetwork(podUid: string, args: string[]): Promise<string> {
  const sandbox = podProcesses(podUid).find((p) => p.command === '/pause');
  if (sandbox === undefined) throw new Error(`pod ${podUid} has no sandbox process (/pause)`);
  return mustRun('nsenter', ['-t', String(sandbox.pid), '-n', ...args]);
}
