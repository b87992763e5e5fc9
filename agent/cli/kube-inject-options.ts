/**
 * What kube-inject may be told (image, port, token Secret, host-network listen address), and the
 * one check of it: the same whether it comes from the command line or from a caller of kubeInject.
 */
import { isDnsSubdomain } from '../proto/names';
import type { CommandUsage } from '../lib/usage';
import { hostNetworkListenAddress } from './kube-inject-host-network';

/** Image of the sidecar when none is given. */
export const DEFAULT_IMAGE = 'etcd-lifecycle-agent:0.1.0';

/** Port the sidecar listens on (and its port named `lifecycle`) when none is given. */
export const DEFAULT_PORT = 3501;

/** `etcd-lifecycle-agent kube-inject`: what its `--help` prints (usage.ts). */
export const KUBE_INJECT_USAGE: CommandUsage = {
  name: 'kube-inject',
  synopsis: '-f FILE|- [--image IMAGE] [--port PORT] [--token-secret SECRET] [--host-network-listen IP]',
  summary: 'print Kubernetes YAML with the agent sidecar added to each pod template (injecting twice changes nothing)',
  details: [
    'Reads a StatefulSet, a Pod, a List or several documents; other kinds pass through. Where the etcd container names its binary and its --data-dir, ' +
      'and the StatefulSet has a serviceName, it also adds the prepare init container.',
  ],
  options: [
    { flag: '-f, --filename FILE|-', meaning: 'the YAML to read; - reads standard input' },
    { flag: '--image IMAGE', default: DEFAULT_IMAGE, meaning: 'the sidecar image' },
    { flag: '--port PORT', default: String(DEFAULT_PORT), meaning: 'the port the agent listens on (named lifecycle)' },
    {
      flag: '--token-secret SECRET',
      meaning: 'a Secret whose key `token` is mounted as ETCD_AGENT_TOKEN_FILE; required for a hostNetwork: true pod',
    },
    { flag: '--host-network-listen IP', default: '127.0.0.1', meaning: 'the address the agent listens on in a hostNetwork: true pod' },
  ],
  notes: [
    'Every injected pod runs as non-root (etcd\'s user, else 65532) with the settings Pod Security "restricted" asks for; ' +
      'a value of the input that "restricted" refuses (hostNetwork: true, runAsUser: 0, privileged: true …) is kept and named on stderr, one warning each.',
    'exit codes: 0 printed (warnings too), 1 the file cannot be read or is not valid YAML, 2 usage',
  ],
};

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
