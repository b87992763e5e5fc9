/**
 * What kube-inject may be told (image, port, token Secret, host-network listen address), and the
 * one check of it: the same whether it comes from the command line or from a caller of kubeInject.
 */
import { isDnsSubdomain } from '../proto/names';
import { hostNetworkListenAddress } from './kube-inject-host-network';

/** Image of the sidecar when none is given. */
export const DEFAULT_IMAGE = 'etcd-lifecycle-agent:0.1.0';

/** Port the sidecar listens on (and its port named `lifecycle`) when none is given. */
export const DEFAULT_PORT = 3501;

/** What kube-inject may be told; everything but the image is optional. */
export interface InjectOptions {
  /** Sidecar image; default `etcd-lifecycle-agent:0.1.0`. */
  image: string;
  /** Port the agent listens on; default 3501. */
  port?: number;
  /** Name of a Secret with key `token`: mounted, and `ETCD_AGENT_TOKEN_FILE` points at it. */
  tokenSecret?: string;
  /** IP address the agent listens on in a `hostNetwork: true` pod; default 127.0.0.1. */
  hostNetworkListen?: string;
}

/** InjectOptions checked, with every default filled in. */
export interface ResolvedInjectOptions {
  image: string;
  port: number;
  tokenSecret?: string;
  hostNetworkListen: string;
}

/** Fills in the defaults and checks the options; throws an Error with a one-line message when one is invalid. */
export function resolveInjectOptions(options: Partial<InjectOptions>): ResolvedInjectOptions {
  const image = options.image ?? DEFAULT_IMAGE;
  const port = options.port ?? DEFAULT_PORT;
  if (image.trim() === '') throw new Error('the image must not be empty');
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new Error(`the port must be an integer in 1-65535, got ${port}`);
  }
  if (options.tokenSecret !== undefined && !isDnsSubdomain(options.tokenSecret)) {
    throw new Error(`the token Secret name must be a DNS-1123 subdomain, got "${options.tokenSecret}"`);
  }
  return { image, port, tokenSecret: options.tokenSecret, hostNetworkListen: hostNetworkListenAddress(options.hostNetworkListen) };
}
