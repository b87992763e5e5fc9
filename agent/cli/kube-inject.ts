/**
 * `etcd-lifecycle-agent kube-inject -f FILE` (CONTRACT §7): adds the agent sidecar to the pod
 * template of every StatefulSet and Pod in a Kubernetes YAML stream, and nothing else.
 *
 * The YAML is edited through the `yaml` Document API, so comments, key order and quoting survive.
 * A pod that already has a container named `etcd-lifecycle-agent` is left exactly as it is, and a
 * stream in which nothing had to change is returned byte for byte: injecting twice changes nothing.
 *
 * Besides the sidecar, one thing changes: the etcd container (the one named `etcd`, else the first
 * whose image contains `etcd`) gets a readinessProbe on the agent's `GET /v1/health/local` when it
 * has none, so a pod is Ready only while its member answers and is in the cluster. A probe the
 * manifest already has is kept.
 *
 * URL schemes are guessed simply: `https` when the etcd container's command, args or
 * `ETCD_LISTEN_CLIENT_URLS` / `ETCD_LISTEN_PEER_URLS` env show `--listen-client-urls` /
 * `--listen-peer-urls` with an `https://` URL, else `http`; ports are etcd's defaults (2379, 2380).
 * TLS material for the agent (`ETCD_AGENT_ETCD_CA_FILE` …) is not guessed: add it by hand.
 *
 * A pod with `hostNetwork: true` needs `--token-secret`, listens on 127.0.0.1 and is probed there
 * (kube-inject-host-network.ts says why). Every sidecar gets `POD_IP` and `HOST_IP` from the
 * downward API, so an agent whose pod is moved to the node's network later sees it
 * (agent/host-network.ts) and does not run without a token.
 */
import { readFile as readFileFromDisk } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { Document, isMap, isScalar, isSeq, Pair, parseAllDocuments, Scalar, YAMLMap, YAMLSeq } from 'yaml';
import { isDnsSubdomain } from '../proto/names';
import { hostNetworkListenAddress, KubeInjectUsageError, ListenPlan, listenPlan } from './kube-inject-host-network';
import { injectPrepare } from './kube-inject-prepare';

export { DEFAULT_HOST_NETWORK_LISTEN, KubeInjectUsageError } from './kube-inject-host-network';

/** Name of the injected container; a pod that has a container of this name counts as injected. */
export const SIDECAR_NAME = 'etcd-lifecycle-agent';

/** Image of the sidecar when none is given. */
export const DEFAULT_IMAGE = 'etcd-lifecycle-agent:0.1.0';

/** Port the sidecar listens on (and its port named `lifecycle`) when none is given. */
export const DEFAULT_PORT = 3501;

/** Where the token Secret is mounted; the Secret must hold the token under the key `token`. */
export const TOKEN_MOUNT_PATH = '/var/run/secrets/etcd-lifecycle-agent';

const TOKEN_VOLUME = 'etcd-lifecycle-agent-token';
const LOCAL_HOST = '127.0.0.1';
const CLIENT_PORT = 2379;
const PEER_PORT = 2380;

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

/** Where a pod lives, as far as its manifest tells. */
interface PodSite {
  namespace?: string;
  /** The governing headless Service: a StatefulSet's `serviceName`, a Pod's `subdomain`. */
  serviceName?: string;
  /** `StatefulSet demo/etcd`, for messages. */
  resource: string;
}

interface ResolvedOptions {
  image: string;
  port: number;
  tokenSecret?: string;
  hostNetworkListen: string;
}

/**
 * Returns `yamlText` with the agent sidecar added to each StatefulSet's pod template and each Pod,
 * also inside a `kind: List` or across `---` documents; other kinds pass through unchanged.
 * Throws an Error with a one-line message when the YAML does not parse or an option is invalid.
 */
export function kubeInject(yamlText: string, options: Partial<InjectOptions> = {}): string {
  const resolved = resolveOptions(options);
  const docs = parseAllDocuments(yamlText);
  if (!Array.isArray(docs) || docs.length === 0) return yamlText;
  for (const doc of docs) {
    const [error] = doc.errors;
    if (error !== undefined) throw new Error(`invalid YAML: ${firstLine(error.message)}`);
  }

  let changed = false;
  for (const doc of docs) {
    if (injectResource(doc, doc.contents, resolved)) changed = true;
  }
  // Unchanged input is returned as it came, so a second run cannot even re-format it.
  if (!changed) return yamlText;
  const format = { lineWidth: 0, flowCollectionPadding: false, indentSeq: detectIndentSeq(yamlText) };
  return docs.map((doc) => doc.toString(format)).join('');
}

function resolveOptions(options: Partial<InjectOptions>): ResolvedOptions {
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

/** Injects into one resource (recursing into lists); true when it changed anything. */
function injectResource(doc: Document, node: unknown, options: ResolvedOptions): boolean {
  if (!isMap(node)) return false;
  const kind = node.get('kind');
  if (kind === 'StatefulSet') {
    const podSpec = node.getIn(['spec', 'template', 'spec']);
    if (!isMap(podSpec)) return false;
    const site = {
      namespace: stringAt(node, ['metadata', 'namespace']),
      serviceName: stringAt(node, ['spec', 'serviceName']),
      resource: resourceName(node),
    };
    return injectPod(doc, podSpec, site, options);
  }
  if (kind === 'Pod') {
    const podSpec = node.get('spec');
    if (!isMap(podSpec)) return false;
    const site = {
      namespace: stringAt(node, ['metadata', 'namespace']),
      serviceName: stringAt(podSpec, ['subdomain']),
      resource: resourceName(node),
    };
    return injectPod(doc, podSpec, site, options);
  }
  if (typeof kind === 'string' && kind.endsWith('List')) {
    const items = node.get('items');
    if (!isSeq(items)) return false;
    let changed = false;
    for (const item of items.items) {
      if (injectResource(doc, item, options)) changed = true;
    }
    return changed;
  }
  return false;
}

/** Adds the sidecar (and etcd's readiness probe, and the token volume) to one pod spec. */
function injectPod(doc: Document, podSpec: YAMLMap, site: PodSite, options: ResolvedOptions): boolean {
  const containers = podSpec.get('containers');
  if (!isSeq(containers)) return false;
  if (hasContainerNamed(containers, SIDECAR_NAME) || hasContainerNamed(podSpec.get('initContainers'), SIDECAR_NAME)) {
    return false;
  }

  const listen = listenPlan(podSpec.get('hostNetwork') === true, site.resource, options);
  const etcd = findEtcdContainer(containers);
  const schemes = {
    client: etcd !== undefined && usesHttps(etcd, 'listen-client-urls') ? 'https' : 'http',
    peer: etcd !== undefined && usesHttps(etcd, 'listen-peer-urls') ? 'https' : 'http',
  };
  const sidecarSpec = sidecarContainer(site, schemes, options, listen) as { env: object[]; resources: object; volumeMounts?: object[] };
  const sidecar = doc.createNode(sidecarSpec);
  sidecar.commentBefore = ' added by etcd-lifecycle-agent kube-inject';
  containers.add(sidecar);
  // The prepare init container and the etcd command that sources its decision (kube-inject-prepare.ts).
  if (etcd !== undefined) {
    injectPrepare(doc, podSpec, etcd, { image: options.image, port: options.port, agentEnv: sidecarSpec.env, agentMounts: sidecarSpec.volumeMounts ?? [], resources: sidecarSpec.resources });
  }

  if (etcd !== undefined && !etcd.has('readinessProbe')) {
    const probe = doc.createNode({
      httpGet: { path: '/v1/health/local', port: options.port, ...listen.probeHost },
      periodSeconds: 5,
      // The answer waits for an observation of at most ETCD_AGENT_HEALTH_MAX_AGE_MS (1 s by default).
      timeoutSeconds: 3,
      failureThreshold: 3,
    });
    const key = new Scalar('readinessProbe');
    key.commentBefore = ' Ready while this member answers and is in the cluster (etcd-lifecycle-agent kube-inject)';
    etcd.add(new Pair(key, probe));
  }

  if (options.tokenSecret !== undefined) {
    let volumes = podSpec.get('volumes');
    if (!isSeq(volumes)) {
      volumes = new YAMLSeq();
      podSpec.set('volumes', volumes);
    }
    const secret = { secretName: options.tokenSecret, items: [{ key: 'token', path: 'token' }] };
    (volumes as YAMLSeq).add(doc.createNode({ name: TOKEN_VOLUME, secret }));
  }
  return true;
}

/**
 * The sidecar's resources: the memory request at least the idle resident memory, and the limit at
 * least 1.5× the peak under the bench's /v1/health load, as the README's bench run measured them on
 * Node 20 and 24 (test/unit/memory-budget.test.ts fails when they drift apart).
 */
export const SIDECAR_RESOURCES = { requests: { cpu: '10m', memory: '96Mi' }, limits: { memory: '200Mi' } };

/** The sidecar container as plain data, in the key order it is printed in. */
function sidecarContainer(
  site: PodSite,
  schemes: { client: string; peer: string },
  options: ResolvedOptions,
  listen: ListenPlan,
): object {
  const local = `${schemes.client}://${LOCAL_HOST}:${CLIENT_PORT}`;
  const endpoints = [local];
  let peerUrlTemplate: string | undefined;
  if (site.serviceName !== undefined) {
    const host =
      site.namespace === undefined ? site.serviceName : `${site.serviceName}.${site.namespace}.svc.cluster.local`;
    endpoints.unshift(`${schemes.client}://${host}:${CLIENT_PORT}`);
    // $(POD_NAMESPACE) is expanded by the kubelet: it is defined earlier in the same env list.
    peerUrlTemplate = `${schemes.peer}://{name}.${site.serviceName}.$(POD_NAMESPACE).svc.cluster.local:${PEER_PORT}`;
  }

  const env: object[] = [
    { name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
    { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } },
    // Equal exactly in a host-network pod: the agent then requires a token (agent/host-network.ts).
    { name: 'POD_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
    { name: 'HOST_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.hostIP' } } },
    { name: 'ETCD_AGENT_LISTEN', value: listen.address },
    { name: 'ETCD_AGENT_MEMBER_NAME', value: '$(POD_NAME)' },
    { name: 'ETCD_AGENT_LOCAL_ENDPOINT', value: local },
    { name: 'ETCD_AGENT_ENDPOINTS', value: endpoints.join(',') },
  ];
  if (peerUrlTemplate !== undefined) env.push({ name: 'ETCD_AGENT_PEER_URL_TEMPLATE', value: peerUrlTemplate });
  if (options.tokenSecret !== undefined) {
    env.push({ name: 'ETCD_AGENT_TOKEN_FILE', value: `${TOKEN_MOUNT_PATH}/token` });
  }
  if (listen.hostNetwork) env.push({ name: 'ETCD_AGENT_HOST_NETWORK', value: 'true' });

  // Kubernetes' default probe timeout (1 s) is tight for a node under load; these answers are local.
  const probe = (path: string): object => ({ httpGet: { path, port: 'lifecycle', ...listen.probeHost }, timeoutSeconds: 2 });
  return {
    name: SIDECAR_NAME,
    image: options.image,
    args: ['serve'],
    ports: [{ name: 'lifecycle', containerPort: options.port, protocol: 'TCP' }],
    env,
    ...(options.tokenSecret === undefined
      ? {}
      : { volumeMounts: [{ name: TOKEN_VOLUME, mountPath: TOKEN_MOUNT_PATH, readOnly: true }] }),
    resources: SIDECAR_RESOURCES,
    livenessProbe: probe('/livez'),
    readinessProbe: probe('/readyz'),
    securityContext: {
      runAsNonRoot: true,
      runAsUser: 65532,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      // Pod Security "restricted" requires it of every container.
      seccompProfile: { type: 'RuntimeDefault' },
    },
  };
}

function hasContainerNamed(containers: unknown, name: string): boolean {
  return isSeq(containers) && containers.items.some((c) => isMap(c) && c.get('name') === name);
}

/** The container named `etcd`, else the first whose image contains `etcd`. */
function findEtcdContainer(containers: YAMLSeq): YAMLMap | undefined {
  const maps = containers.items.filter((c): c is YAMLMap => isMap(c));
  return (
    maps.find((c) => c.get('name') === 'etcd') ??
    maps.find((c) => { const image = c.get('image'); return typeof image === 'string' && image.includes('etcd'); })
  );
}

/** True when the container sets etcd's `--<flag>` (or its `ETCD_*` env twin) to an https URL. */
function usesHttps(container: YAMLMap, flag: string): boolean {
  const words = [...stringsOf(container.get('command')), ...stringsOf(container.get('args'))].join(' ');
  const fromArgs = new RegExp(`--${flag}(?:=|\\s+)["']?(\\S+)`).exec(words)?.[1];
  const envName = `ETCD_${flag.toUpperCase().replace(/-/g, '_')}`;
  const env = container.get('env');
  const fromEnv = isSeq(env)
    ? env.items.find((e): e is YAMLMap => isMap(e) && e.get('name') === envName)?.get('value')
    : undefined;
  return [fromArgs, fromEnv].some((value) => typeof value === 'string' && value.includes('https://'));
}

function stringsOf(node: unknown): string[] {
  if (!isSeq(node)) return [];
  return node.items
    .map((item) => (isScalar(item) ? item.value : item))
    .filter((value): value is string => typeof value === 'string');
}

function resourceName(node: YAMLMap): string {
  const namespace = stringAt(node, ['metadata', 'namespace']);
  const name = stringAt(node, ['metadata', 'name']) ?? '(unnamed)';
  return `${String(node.get('kind'))} ${namespace === undefined ? name : `${namespace}/${name}`}`;
}

function stringAt(node: YAMLMap, path: string[]): string | undefined {
  const value = node.getIn(path);
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * Whether the input indents a block sequence under its key (`key:\n  - a`) or not (`key:\n- a`,
 * kubectl's style); the first sequence that tells decides, kubectl's style when none does.
 */
function detectIndentSeq(text: string): boolean {
  const lines = text.split(/\r?\n/);
  let previous: string | undefined;
  for (const line of lines) {
    if (line.trim() === '' || line.trim().startsWith('#')) continue;
    const dash = /^( *)- /.exec(line);
    if (dash !== null && previous !== undefined && /:\s*(#.*)?$/.test(previous)) {
      const keyColumn = /^ *(?:- +)*/.exec(previous)?.[0].length ?? 0;
      return dash[1].length > keyColumn;
    }
    previous = line;
  }
  return false;
}

function firstLine(message: string): string {
  return message.split('\n')[0].trim();
}

/** The streams and file access runKubeInject uses; tests pass their own. */
export interface KubeInjectIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  /** Reads a file, or standard input for `-`; defaults to the file system and process.stdin. */
  readFile?: (path: string) => Promise<string>;
}

/** One-line usage of the command, printed with `--help` and after a usage error. */
export const KUBE_INJECT_USAGE =
  'usage: etcd-lifecycle-agent kube-inject -f FILE|- [--image IMAGE] [--port PORT] [--token-secret SECRET] [--host-network-listen IP]';

/**
 * Runs `kube-inject` with `argv` (the arguments after the command name; a leading `kube-inject`
 * is skipped) and prints the result. Exit code 0 on success, 2 for a usage error (no `-f`, an
 * unknown or invalid flag, a host-network pod without `--token-secret`), 1 when the file cannot
 * be read or is not valid YAML.
 */
export async function runKubeInject(argv: string[], io: KubeInjectIo): Promise<number> {
  const args = argv[0] === 'kube-inject' ? argv.slice(1) : argv;
  let values: {
    filename?: string;
    image?: string;
    port?: string;
    'token-secret'?: string;
    'host-network-listen'?: string;
    help?: boolean;
  };
  try {
    ({ values } = parseArgs({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        filename: { type: 'string', short: 'f' },
        image: { type: 'string' },
        port: { type: 'string' },
        'token-secret': { type: 'string' },
        'host-network-listen': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    return usageError(io, errorMessage(error));
  }
  if (values.help === true) {
    io.stdout(`${KUBE_INJECT_USAGE}\n`);
    return 0;
  }
  if (values.filename === undefined || values.filename === '') {
    return usageError(io, 'missing -f FILE (use - for stdin)');
  }
  if (values.port !== undefined && !/^\d+$/.test(values.port)) {
    return usageError(io, `--port must be a number, got "${values.port}"`);
  }

  const options: Partial<InjectOptions> = {
    image: values.image,
    port: values.port === undefined ? undefined : Number(values.port),
    tokenSecret: values['token-secret'],
    hostNetworkListen: values['host-network-listen'],
  };
  try {
    resolveOptions(options);
  } catch (error) {
    return usageError(io, errorMessage(error));
  }

  const file = values.filename;
  const source = file === '-' ? 'stdin' : file;
  let text: string;
  try {
    text = await (io.readFile ?? readFileOrStdin)(file);
  } catch (error) {
    io.stderr(`kube-inject: cannot read ${source}: ${firstLine(errorMessage(error))}\n`);
    return 1;
  }
  try {
    io.stdout(kubeInject(text, options));
  } catch (error) {
    if (error instanceof KubeInjectUsageError) return usageError(io, `${source}: ${error.message}`);
    io.stderr(`kube-inject: ${source}: ${firstLine(errorMessage(error))}\n`);
    return 1;
  }
  return 0;
}

function usageError(io: KubeInjectIo, message: string): number {
  io.stderr(`kube-inject: ${firstLine(message)}\n${KUBE_INJECT_USAGE}\n`);
  return 2;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function readFileOrStdin(path: string): Promise<string> {
  if (path !== '-') return readFileFromDisk(path, 'utf8');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks).toString('utf8');
}
