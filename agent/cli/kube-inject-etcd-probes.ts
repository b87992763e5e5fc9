/**
 * The probes kube-inject gives the etcd container when it has none: what that etcd offers, read
 * from its image tag and its listen URLs. Pure. Invariant: a learner's pod is never Ready
 * (docs/deploy/statefulset.md: it serves no client request), and a probe never depends on the agent
 * where etcd can answer it itself (a sidecar that restarts must not make etcd unready or restart it).
 *
 * - Readiness: etcd's own `GET /readyz` where it fails a learner (`non_learner` check, etcd
 *   3.5.19 and later) and a port answers plain HTTP to the kubelet; else the agent's
 *   `/v1/health/local?voter=true`, which answers the same on every version (a learner is not ready).
 * - Liveness: etcd's own `GET /livez` (3.5.11 and later; its one check is a serializable read, so a
 *   member that lost its quorum is alive, not restarted), else `/health?serializable=true`, on such
 *   a port; none when there is no such port (through the agent, etcd would restart with its sidecar).
 *
 * The plain-HTTP port is the first `http://` URL of `--listen-metrics-urls` (etcd serves /livez,
 * /readyz and /health there too), else of `--listen-client-urls`, that listens on all addresses (or
 * on an address from the environment, e.g. `$(POD_IP)`): the kubelet probes the pod IP. A
 * host-network pod gets the agent's readiness and no liveness: where etcd listens there is the
 * node's business. An image whose tag names no version counts as the oldest etcd.
 */
import { atLeast } from '../etcd/server-version';

/**
 * The readiness probe's timing: looked at every 5 s, unready after 3 misses, each answer within 3 s
 * (the agent's `/v1/health/local` waits up to one observation, ETCD_AGENT_HEALTH_MAX_AGE_MS).
 */
const READINESS_TIMING = { periodSeconds: 5, failureThreshold: 3, timeoutSeconds: 3 };
/**
 * The liveness probe's timing, as deploy/statefulset.yaml gives etcd: a restart only after 8 misses
 * 10 s apart, so a member that is slow for a while (a defragmentation, a slow disk) is not restarted.
 */
const LIVENESS_TIMING = { initialDelaySeconds: 10, periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 8 };

/** What kube-inject reads of the etcd container. */
export interface EtcdProbeSite {
  image?: string;
  /** The value of `--listen-metrics-urls` (flag or `ETCD_LISTEN_METRICS_URLS`), if set. */
  metricsUrls?: string;
  /** The value of `--listen-client-urls`, if set. */
  clientUrls?: string;
  hostNetwork: boolean;
}

/** An httpGet probe as a pod spec writes it. */
export interface HttpProbe {
  httpGet: { path: string; port: number; host?: string };
  initialDelaySeconds?: number;
  periodSeconds: number;
  timeoutSeconds: number;
  failureThreshold: number;
}

/** The etcd container's probes, and why in one line (the comment kube-inject writes above each). */
export interface EtcdProbes {
  readiness: HttpProbe;
  readinessWhy: string;
  liveness?: HttpProbe;
  livenessWhy?: string;
}

/** The etcd version an image tag names (`quay.io/coreos/etcd:v3.6.16` → `3.6.16`, `registry.k8s.io/etcd:3.6.5-0` → `3.6.5`). */
export function etcdImageVersion(image: string | undefined): string | undefined {
  const tag = /:([^:/@]+)(@sha256:[0-9a-f]+)?$/.exec(image ?? '')?.[1];
  return /^v?(\d+\.\d+\.\d+)/.exec(tag ?? '')?.[1];
}

/** The port of the first `http://` URL in `urls` that the kubelet reaches at the pod IP, if any. */
export function kubeletPort(urls: string | undefined): number | undefined {
  for (const raw of (urls ?? '').split(',').map((u) => u.trim())) {
    const m = /^http:\/\/(\[[^\]]*\]|[^:/]*):(\d+)\/?$/i.exec(raw);
    if (m === null) continue;
    const host = m[1];
    if (host === '0.0.0.0' || host === '[::]' || host === '' || host.includes('$(')) return Number(m[2]);
  }
  return undefined;
}

/** The etcd container's probes for `site`, the agent listening on `agentPort` (reached at `agentHost` when set). */
export function etcdProbes(site: EtcdProbeSite, agentPort: number, agentHost: { host?: string } = {}): EtcdProbes {
  const version = etcdImageVersion(site.image);
  const port = site.hostNetwork ? undefined : (kubeletPort(site.metricsUrls) ?? kubeletPort(site.clientUrls));
  const said = version === undefined ? 'an etcd whose image tag names no version' : `etcd ${version}`;
  const readiness: Pick<EtcdProbes, 'readiness' | 'readinessWhy'> =
    port !== undefined && atLeast(version, 3, 5, 19)
      ? {
          readiness: { httpGet: { path: '/readyz', port }, ...READINESS_TIMING },
          readinessWhy: `etcd's own /readyz (${said} fails a learner there): Ready while this member serves clients`,
        }
      : {
          // The answer waits for an observation of at most ETCD_AGENT_HEALTH_MAX_AGE_MS (1 s by default).
          readiness: { httpGet: { path: '/v1/health/local?voter=true', port: agentPort, ...agentHost }, ...READINESS_TIMING },
          readinessWhy: `through the agent (${said} has no /readyz that fails a learner): Ready while this member answers, is in the cluster and is a voter`,
        };
  if (port === undefined) return readiness;
  return atLeast(version, 3, 5, 11)
    ? {
        ...readiness,
        liveness: { httpGet: { path: '/livez', port }, ...LIVENESS_TIMING },
        livenessWhy: `etcd's own /livez (${said}): a serializable read, so losing quorum is no reason to restart`,
      }
    : {
        ...readiness,
        liveness: { httpGet: { path: '/health?serializable=true', port }, ...LIVENESS_TIMING },
        livenessWhy: `${said} has no /livez: a serializable /health, so losing quorum is no reason to restart`,
      };
}
