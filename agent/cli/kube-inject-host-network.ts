/**
 * kube-inject for a `hostNetwork: true` pod: where the agent listens and how its probes reach
 * it there. Invariant: such a pod is never injected without a token Secret, and its agent never
 * listens where its own probes cannot reach it.
 *
 * Such a pod shares the node's network namespace: its loopback is the node's, open to every
 * process and host-network pod on the node, so the agent needs a token (it refuses to start
 * without one, agent/config/host-network.ts) and kube-inject refuses to inject without
 * `--token-secret`. The agent listens on 127.0.0.1 unless told otherwise, off the node's
 * addresses. The kubelet sends an `httpGet` probe to the pod IP unless `httpGet.host` says
 * otherwise, and a host-network pod's IP is the node's address, where nothing would then
 * listen; the kubelet runs in the node's network namespace, the same as the pod's, so
 * `host: 127.0.0.1` reaches the agent. The Kubernetes probe documentation names this very case
 * (a container listening on 127.0.0.1 in a `hostNetwork` pod) as the reason for `host`. An exec
 * probe would work too, but starts a Node process (the agent's CLI) every period. Pod Security's `baseline` level forbids `hostNetwork` anyway, so such pods run at
 * `privileged`, where a probe `host` is allowed.
 */
import { isIP } from 'node:net';

/** Address the agent of a `hostNetwork: true` pod listens on when none is given: off the node's addresses. */
export const DEFAULT_HOST_NETWORK_LISTEN = '127.0.0.1';

/** A manifest kube-inject will not inject as asked (a host-network pod without a token): a usage error, exit 2. */
export class KubeInjectUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KubeInjectUsageError';
  }
}

/** Where the agent listens (`ETCD_AGENT_LISTEN`), and the `host` its probes need to reach it (none: the pod IP). */
export interface ListenPlan {
  address: string;
  hostNetwork: boolean;
  probeHost: { host?: string };
}

/** `--host-network-listen`, checked: an IP address (default 127.0.0.1); throws a one-line Error otherwise. */
export function hostNetworkListenAddress(value: string | undefined): string {
  const address = value ?? DEFAULT_HOST_NETWORK_LISTEN;
  if (isIP(address) === 0) throw new Error(`--host-network-listen must be an IP address, got "${address}"`);
  return address;
}

/**
 * Pod network: all addresses, probed on the pod IP. Host network: `hostNetworkListen`, probed
 * there (on the pod IP = the node's address when it is a wildcard); without a token Secret a
 * KubeInjectUsageError naming `resource`.
 */
export function listenPlan(
  hostNetwork: boolean,
  resource: string,
  options: { port: number; tokenSecret?: string; hostNetworkListen: string },
): ListenPlan {
  if (hostNetwork && options.tokenSecret === undefined) {
    throw new KubeInjectUsageError(
      `${resource} has hostNetwork: true: its loopback is the node's, open to every process there, so the agent ` +
        'needs a token: pass --token-secret SECRET (a Secret with the key "token")',
    );
  }
  const host = hostNetwork ? options.hostNetworkListen : '0.0.0.0';
  const wildcard = host === '0.0.0.0' || host === '::';
  return {
    address: `${isIP(host) === 6 ? `[${host}]` : host}:${options.port}`,
    hostNetwork,
    probeHost: wildcard ? {} : { host },
  };
}
