/**
 * Whether this agent shares the node's network namespace (a `hostNetwork: true` pod, or a
 * process on the host itself). There the loopback interface is the node's: every process and
 * host-network pod on the node reaches 127.0.0.1, so "loopback only" (docs/api.md §6) is no
 * boundary, and a token is required for mutating calls (see `server/auth.ts`).
 *
 * Invariant: the answer is true whenever the operator says so, or the pod's own addresses show
 * it; it is false only when the operator says so and the addresses do not contradict it, or
 * when nothing is known. `startupAuthRefusal` is what that means at start-up: no token, no start.
 *
 * Why a setting plus the pod's addresses, and not the kernel's namespaces:
 * - Comparing `/proc/self/ns/net` with `/proc/1/ns/net` only tells anything when PID 1 is the
 *   host's init. In a container without `hostPID` PID 1 is the container's own first process,
 *   which shares the pod's network namespace in both modes: the two always match, and a
 *   pod-network agent would wrongly take itself for a host-network one. With `hostPID` (or on
 *   the host), reading PID 1's namespace link needs ptrace access to it, which a non-root
 *   agent with every capability dropped does not have, and a container runtime may refuse it
 *   even to root (`readlink /proc/1/ns/net`: Permission denied). So it cannot decide.
 * - `ETCD_AGENT_HOST_NETWORK=true|false` says it outright; kube-inject sets it from the pod
 *   spec. It is the only way for a process on a host outside Kubernetes.
 * - The pod's addresses from the downward API (`POD_IP` ← `status.podIP`, `HOST_IP` ←
 *   `status.hostIP`) are equal exactly when the pod uses the host's network: the kubelet
 *   reports a host-network pod's IP as the node's. They come from the running pod, not from a
 *   manifest, so they also catch `hostNetwork: true` set after injection (a kustomize
 *   overlay) or by an operator, as KubeBlocks does for a Component with
 *   `spec.network.hostNetwork` over the same ComponentDefinition. kube-inject wires both.
 */

/** What ETCD_AGENT_HOST_NETWORK may say; `auto` (the default) decides from POD_IP and HOST_IP. */
export type HostNetworkSetting = 'true' | 'false' | 'auto';

/** Reads a value of ETCD_AGENT_HOST_NETWORK (booleans as the other settings spell them); undefined when invalid. */
export function hostNetworkSetting(value: string): HostNetworkSetting | undefined {
  if (/^auto$/i.test(value)) return 'auto';
  if (/^(true|1|yes)$/i.test(value)) return 'true';
  if (/^(false|0|no)$/i.test(value)) return 'false';
  return undefined;
}

/** The inputs of the decision: the setting and the downward-API addresses, as found. */
export interface HostNetworkInputs {
  setting: HostNetworkSetting;
  podIp?: string;
  hostIp?: string;
}

/** The decision: host network or not, why, or a contradiction to refuse start-up with. */
export type HostNetworkAnswer = { hostNetwork: boolean; reason: string } | { conflict: string };

/**
 * Decides whether the agent runs in the node's network namespace (pure). An explicit `false`
 * that the addresses contradict is a conflict, not a silent `false`: believing it would open
 * membership changes to every process on the node.
 */
export function resolveHostNetwork(inputs: HostNetworkInputs): HostNetworkAnswer {
  const podIp = inputs.podIp?.trim().toLowerCase() || undefined;
  const hostIp = inputs.hostIp?.trim().toLowerCase() || undefined;
  const shared = podIp !== undefined && podIp === hostIp;
  if (inputs.setting === 'true') return { hostNetwork: true, reason: 'ETCD_AGENT_HOST_NETWORK=true' };
  if (inputs.setting === 'false') {
    if (shared) {
      return { conflict: `is false, but POD_IP equals HOST_IP (${podIp}): the pod uses the node's network namespace` };
    }
    return { hostNetwork: false, reason: 'ETCD_AGENT_HOST_NETWORK=false' };
  }
  if (shared) return { hostNetwork: true, reason: `POD_IP equals HOST_IP (${podIp})` };
  if (podIp !== undefined && hostIp !== undefined) {
    return { hostNetwork: false, reason: `POD_IP (${podIp}) differs from HOST_IP (${hostIp})` };
  }
  return { hostNetwork: false, reason: 'no ETCD_AGENT_HOST_NETWORK, and POD_IP or HOST_IP unset' };
}

/** The settings that decide whether the agent may start without a token. */
export interface StartupAuthSettings {
  tokenConfigured: boolean;
  allowRemoteUnauthenticated: boolean;
  hostNetwork: boolean;
  hostNetworkAllowUnauthenticatedLoopback: boolean;
  /** Why the agent believes it is in the node's network namespace, for the message. */
  hostNetworkReason?: string;
}

/**
 * Start-up's half of the rule (pure): in the node's network namespace, without a token file,
 * any process on the node could change membership, so the agent refuses to start; the
 * answer names the variable to set. Undefined when it may start: not host network, a token,
 * or an explicit opt-out (the loopback one, or the wider remote one, which includes it).
 */
export function startupAuthRefusal(settings: StartupAuthSettings): { variable: string; message: string } | undefined {
  if (!settings.hostNetwork || settings.tokenConfigured) return undefined;
  if (settings.hostNetworkAllowUnauthenticatedLoopback || settings.allowRemoteUnauthenticated) return undefined;
  return {
    variable: 'ETCD_AGENT_TOKEN_FILE',
    message:
      `is required in the node's network namespace${settings.hostNetworkReason === undefined ? '' : ` (${settings.hostNetworkReason})`}, ` +
      'where the loopback is shared by every process on the node; ' +
      'set it, or accept unauthenticated loopback calls with ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK=true',
  };
}
