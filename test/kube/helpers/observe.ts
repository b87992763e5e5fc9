/**
 * What a story records while it runs, each record stamped with the moment this process had it:
 * - the pods of its namespace, from a watch of the API server (phase, Ready, being deleted, each
 *   container's restarts and last termination);
 * - the agent's `/v1/health` of every pod, asked over the pod IP (pod IPs are routed from the
 *   test's network namespace), with the `observedAt` of each answer;
 * - etcd's own view from every pod, over the pod IP through etcd's JSON gateway: its status
 *   (cluster id, member id, learner or not) and its member list.
 * The stories judge order and loss from these records (judge.ts), not from how long things took.
 */
import { call } from '../../helpers/http-call';
import type { KubeApi, KubeObject, Watch, WatchEvent } from './kube-api';

/** A container's state in one pod record. */
export interface ContainerState {
  ready: boolean;
  restartCount: number;
  containerID?: string;
  running: boolean;
  /** How it ended, while it is terminated (exit code and reason). */
  terminated?: { exitCode: number; reason?: string };
  /** The last termination kubelet reports (exit code and reason), if any. */
  lastTerminated?: { exitCode: number; reason?: string };
}

/** A pod as one watch event showed it. */
export interface PodRecord {
  at: number;
  type: WatchEvent['type'];
  name: string;
  uid: string;
  phase: string;
  ready: boolean;
  deleting: boolean;
  podIP?: string;
  containers: Record<string, ContainerState>;
}

function podRecord(e: WatchEvent): PodRecord {
  const o = e.object;
  const statuses = [...(o.status?.containerStatuses ?? [])] as Array<{
    name: string;
    ready: boolean;
    restartCount: number;
    containerID?: string;
    state?: { running?: unknown; terminated?: { exitCode: number; reason?: string } };
    lastState?: { terminated?: { exitCode: number; reason?: string } };
  }>;
  const conditions = (o.status?.conditions ?? []) as Array<{ type: string; status: string }>;
  return {
    at: e.at,
    type: e.type,
    name: o.metadata.name,
    uid: o.metadata.uid,
    phase: String(o.status?.phase ?? ''),
    ready: e.type !== 'DELETED' && conditions.some((c) => c.type === 'Ready' && c.status === 'True'),
    deleting: e.type === 'DELETED' || o.metadata.deletionTimestamp !== undefined,
    podIP: o.status?.podIP,
    containers: Object.fromEntries(
      statuses.map((s) => [
        s.name,
        {
          ready: s.ready,
          restartCount: s.restartCount,
          containerID: s.containerID,
          running: s.state?.running !== undefined,
          terminated: s.state?.terminated,
          lastTerminated: s.lastState?.terminated,
        },
      ]),
    ),
  };
}

/** The pods of a namespace, watched: every change recorded, and the latest of each pod. */
export class PodWatch {
  readonly records: PodRecord[] = [];
  readonly objects = new Map<string, KubeObject>();
  private readonly latest = new Map<string, PodRecord>();
  private readonly watch: Watch;

  constructor(api: KubeApi, namespace: string) {
    this.watch = api.watch(`/api/v1/namespaces/${namespace}/pods`, (e) => {
      const r = podRecord(e);
      this.records.push(r);
      if (e.type === 'DELETED') {
        if (this.latest.get(r.name)?.uid === r.uid) {
          this.latest.delete(r.name);
          this.objects.delete(r.name);
        }
      } else {
        this.latest.set(r.name, r);
        this.objects.set(r.name, e.object);
      }
    });
  }

  /** The pods there now, by name. */
  current(): Map<string, PodRecord> {
    return new Map(this.latest);
  }

  /** The pod named `name` now, if there is one. */
  pod(name: string): PodRecord | undefined {
    return this.latest.get(name);
  }

  stop(): void {
    this.watch.stop();
  }
}

/**
 * Asks `ask(pod)` of every pod that has an IP, about every `everyMs`, one question per pod at a
 * time, and keeps the answers.
 */
export class PodPoller<T> {
  readonly records: T[] = [];
  private readonly inFlight = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly pods: PodWatch,
    private readonly everyMs: number,
    private readonly ask: (pod: PodRecord) => Promise<T>,
  ) {}

  start(): this {
    const tick = (): void => {
      for (const pod of this.pods.current().values()) {
        // Per pod uid: a question hanging on a pod that is gone does not hold up its successor.
        if (pod.podIP === undefined || this.inFlight.has(pod.uid)) continue;
        this.inFlight.add(pod.uid);
        const p = this.ask(pod)
          .then((r) => void this.records.push(r))
          .finally(() => {
            this.inFlight.delete(pod.uid);
            this.pending.delete(p);
          });
        this.pending.add(p);
      }
      this.timer = setTimeout(tick, this.everyMs);
    };
    tick();
    return this;
  }

  /** Stops asking; resolves when the questions in flight have their answers. */
  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await Promise.all([...this.pending]);
  }
}

/** One `/v1/health` answer of a pod's agent. */
export interface HealthRecord {
  at: number;
  sentAt: number;
  pod: string;
  podUid: string;
  httpStatus?: number;
  status?: string;
  /** When the observation that this answer reports started (ms since the epoch). */
  observedAt?: number;
  voters?: number;
  healthyVoters?: number;
  members?: Array<{ name: string; isLearner: boolean }>;
  expected?: { missing: string[]; unexpected: string[] };
  error?: string;
}

/** GET http://<pod IP>:3501/v1/health (with `?expected=` when given) of `pod`, as a record. */
export async function askHealth(pod: PodRecord, expected?: string[]): Promise<HealthRecord> {
  const sentAt = Date.now();
  const base = { sentAt, pod: pod.name, podUid: pod.uid };
  try {
    const query = expected === undefined ? '' : `?expected=${expected.join(',')}`;
    const a = await call(`http://${pod.podIP}:3501`, { path: `/v1/health${query}`, timeoutMs: 5000 });
    const body = a.json as
      | {
          status?: string;
          observedAt?: string | null;
          quorum?: { voters: number; healthyVoters: number } | null;
          members?: Array<{ name: string; isLearner: boolean }>;
          expected?: { missing: string[]; unexpected: string[] };
        }
      | undefined;
    return {
      ...base,
      at: Date.now(),
      httpStatus: a.status,
      status: body?.status,
      observedAt: typeof body?.observedAt === 'string' ? Date.parse(body.observedAt) : undefined,
      voters: body?.quorum?.voters,
      healthyVoters: body?.quorum?.healthyVoters,
      members: body?.members?.map((m) => ({ name: m.name, isLearner: m.isLearner })),
      expected: body?.expected,
    };
  } catch (err) {
    return { ...base, at: Date.now(), error: String(err) };
  }
}

/** A member as etcd lists it. */
export interface EtcdMember {
  id: string;
  name: string;
  isLearner: boolean;
  peerURLs: string[];
}

/** What one pod's etcd said about itself and the cluster. */
export interface EtcdRecord {
  at: number;
  sentAt: number;
  pod: string;
  podUid: string;
  /** The status call: etcd answering at all, and as which member of which cluster. */
  clusterId?: string;
  memberId?: string;
  isLearner?: boolean;
  /** The leader this member knows (its id), and its raft term. */
  leader?: string;
  raftTerm?: string;
  /** Its database file's size, and how much of it holds data (what a defragmentation gives back is the rest). */
  dbSize?: number;
  dbSizeInUse?: number;
  /** The member list this etcd gave (a learner may refuse it). */
  members?: EtcdMember[];
  error?: string;
}

/** etcd's JSON gateway on the pod IP: POST `path` with `{}`. */
async function gateway(pod: PodRecord, path: string): Promise<Record<string, unknown>> {
  const a = await call(`http://${pod.podIP}:2379`, { method: 'POST', path, body: {}, timeoutMs: 3000 });
  if (a.status !== 200 || a.json === undefined) throw new Error(`${path}: HTTP ${a.status}: ${a.text.slice(0, 200)}`);
  return a.json as Record<string, unknown>;
}

/** etcd's status and member list on `pod`, as a record. */
export async function askEtcd(pod: PodRecord): Promise<EtcdRecord> {
  const sentAt = Date.now();
  const base = { sentAt, pod: pod.name, podUid: pod.uid };
  let status: {
    header?: { cluster_id?: string; member_id?: string };
    isLearner?: boolean;
    leader?: string;
    raftTerm?: string;
    dbSize?: string;
    dbSizeInUse?: string;
  };
  try {
    status = (await gateway(pod, '/v3/maintenance/status')) as typeof status;
  } catch (err) {
    return { ...base, at: Date.now(), error: String(err) };
  }
  const answered = {
    ...base,
    clusterId: status.header?.cluster_id,
    memberId: status.header?.member_id,
    isLearner: status.isLearner === true,
    leader: status.leader,
    raftTerm: status.raftTerm,
    ...(status.dbSize === undefined ? {} : { dbSize: Number(status.dbSize) }),
    ...(status.dbSizeInUse === undefined ? {} : { dbSizeInUse: Number(status.dbSizeInUse) }),
  };
  try {
    const list = (await gateway(pod, '/v3/cluster/member/list')) as {
      members?: Array<{ ID: string; name?: string; isLearner?: boolean; peerURLs?: string[] }>;
    };
    const members = (list.members ?? []).map((m) => ({
      id: m.ID,
      name: m.name ?? '',
      isLearner: m.isLearner === true,
      peerURLs: m.peerURLs ?? [],
    }));
    return { ...answered, at: Date.now(), members };
  } catch (err) {
    return { ...answered, at: Date.now(), error: `member list: ${String(err)}` };
  }
}
