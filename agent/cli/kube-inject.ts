/**
 * `etcd-lifecycle-agent kube-inject -f FILE` (docs/api.md §7): adds the agent sidecar to the pod
 * template of every StatefulSet and Pod in a Kubernetes YAML stream, and nothing else.
 *
 * The YAML is edited through the `yaml` Document API, so comments, key order and quoting survive.
 * A pod that already has a container named `etcd-lifecycle-agent` is left exactly as it is, and a
 * stream in which nothing had to change is returned byte for byte: injecting twice changes nothing.
 *
 * The sidecar gets an emptyDir over its temporary directory, where a backup's verification restores
 * (its root file system is read-only).
 *
 * Besides the sidecar, the etcd container (the one named `etcd`, else the first whose image
 * contains `etcd`) gets the probes it lacks, chosen by what that etcd offers
 * (kube-inject-etcd-probes.ts): a readinessProbe (etcd's own /readyz from 3.5.19, else the agent's
 * `/v1/health/local?voter=true`), so a pod is Ready only while its member serves clients — a
 * learner is not — and a livenessProbe on etcd's /livez (or serializable /health) where a port
 * answers plain HTTP. A probe the manifest already has is kept.
 *
 * URL schemes are guessed simply: `https` when the etcd container's command, args or
 * `ETCD_LISTEN_CLIENT_URLS` / `ETCD_LISTEN_PEER_URLS` env show `--listen-client-urls` /
 * `--listen-peer-urls` with an `https://` URL, else `http`; ports are etcd's defaults (2379, 2380).
 * TLS material for the agent (`ETCD_AGENT_ETCD_CA_FILE` …) is not guessed: add it by hand.
 *
 * A pod with `hostNetwork: true` needs `--token-secret`, listens on 127.0.0.1 and is probed there
 * (kube-inject-host-network.ts says why). Every sidecar gets `POD_IP` and `HOST_IP` from the
 * downward API, so an agent whose pod is moved to the node's network later sees it
 * (agent/config/host-network.ts) and does not run without a token.
 *
 * Every pod it injects is made to pass Pod Security "restricted" as far as its input allows: it runs
 * as non-root (etcd's user, else 65532) with `fsGroup` for etcd's volume, the runtime's default
 * seccomp profile, no privilege escalation and no capabilities (kube-inject-restricted.ts). A value
 * of the input that "restricted" refuses (`hostNetwork: true`, `runAsUser: 0`, `privileged: true`
 * …) is kept, and named in one warning per field.
 *
 * This file edits the YAML; the command around it is kube-inject-command.ts, the sidecar container
 * kube-inject-sidecar.ts, the options and their check kube-inject-options.ts.
 */
import { Document, isMap, isSeq, Pair, parseAllDocuments, Scalar, YAMLMap, YAMLSeq } from 'yaml';
import { listenPlan } from './kube-inject-host-network';
import { InjectOptions, ResolvedInjectOptions, resolveInjectOptions } from './kube-inject-options';
import { etcdProbes } from './kube-inject-etcd-probes';
import { injectPrepare } from './kube-inject-prepare';
import { etcdRunAs, restrictContainers, restrictedFindings, restrictPod } from './kube-inject-restricted';
import { PodSite, SCRATCH_VOLUME, SIDECAR_NAME, sidecarContainer, TOKEN_VOLUME } from './kube-inject-sidecar';
import { envValue, seqAt, stringsOf } from './yaml-nodes';

/**
 * Returns `yamlText` with the agent sidecar added to each StatefulSet's pod template and each Pod,
 * also inside a `kind: List` or across `---` documents; other kinds pass through unchanged.
 * `warn` is given one line for each value of an injected pod that Pod Security "restricted" refuses
 * (`StatefulSet demo/etcd: spec.template.spec.hostNetwork is true: …`).
 * Throws an Error with a one-line message when the YAML does not parse or an option is invalid.
 */
export function kubeInject(yamlText: string, options: Partial<InjectOptions> = {}, warn: (line: string) => void = () => undefined): string {
  const resolved = resolveInjectOptions(options);
  const docs = parseAllDocuments(yamlText);
  if (!Array.isArray(docs) || docs.length === 0) return yamlText;
  for (const doc of docs) {
    const [error] = doc.errors;
    if (error !== undefined) throw new Error(`invalid YAML: ${firstLine(error.message)}`);
  }

  let changed = false;
  for (const doc of docs) {
    if (injectResource(doc, doc.contents, resolved, warn)) changed = true;
  }
  // Unchanged input is returned as it came, so a second run cannot even re-format it.
  if (!changed) return yamlText;
  const format = { lineWidth: 0, flowCollectionPadding: false, indentSeq: detectIndentSeq(yamlText) };
  return docs.map((doc) => doc.toString(format)).join('');
}

/** Injects into one resource (recursing into lists); true when it changed anything. */
function injectResource(doc: Document, node: unknown, options: ResolvedInjectOptions, warn: (line: string) => void): boolean {
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
    return injectPod(doc, podSpec, site, options, warn, 'spec.template.spec');
  }
  if (kind === 'Pod') {
    const podSpec = node.get('spec');
    if (!isMap(podSpec)) return false;
    const site = {
      namespace: stringAt(node, ['metadata', 'namespace']),
      serviceName: stringAt(podSpec, ['subdomain']),
      resource: resourceName(node),
    };
    return injectPod(doc, podSpec, site, options, warn, 'spec');
  }
  if (typeof kind === 'string' && kind.endsWith('List')) {
    const items = node.get('items');
    if (!isSeq(items)) return false;
    let changed = false;
    for (const item of items.items) {
      if (injectResource(doc, item, options, warn)) changed = true;
    }
    return changed;
  }
  return false;
}

/**
 * Adds the sidecar (and etcd's readiness probe, and the token volume) to one pod spec, at `at` in its
 * resource (`spec.template.spec`), and makes the pod restricted as far as its input allows.
 */
function injectPod(
  doc: Document,
  podSpec: YAMLMap,
  site: PodSite,
  options: ResolvedInjectOptions,
  warn: (line: string) => void,
  at: string,
): boolean {
  const containers = podSpec.get('containers');
  if (!isSeq(containers)) return false;
  if (hasContainerNamed(containers, SIDECAR_NAME) || hasContainerNamed(podSpec.get('initContainers'), SIDECAR_NAME)) {
    return false;
  }

  const listen = listenPlan(podSpec.get('hostNetwork') === true, site.resource, options);
  const etcd = findEtcdContainer(containers);
  const input = podSpec.toJSON() as Record<string, unknown>;
  for (const finding of restrictedFindings(input)) {
    warn(
      `${site.resource}: ${at}.${finding.field} is ${finding.value}: Pod Security "restricted" refuses this pod (kept as the input sets it)`,
    );
  }
  const runAs = etcdRunAs(input, etcd?.toJSON() as Record<string, unknown> | undefined);
  restrictPod(doc, podSpec, runAs);
  const schemes = {
    client: etcd !== undefined && usesHttps(etcd, 'listen-client-urls') ? 'https' : 'http',
    peer: etcd !== undefined && usesHttps(etcd, 'listen-peer-urls') ? 'https' : 'http',
  };
  const sidecarSpec = sidecarContainer(site, schemes, options, listen) as { env: object[]; resources: object; volumeMounts: object[] };
  const sidecar = doc.createNode(sidecarSpec);
  sidecar.commentBefore = ' added by etcd-lifecycle-agent kube-inject';
  containers.add(sidecar);
  // The prepare init container and the etcd command that sources its decision (kube-inject-prepare.ts).
  if (etcd !== undefined) {
    injectPrepare(
      doc,
      podSpec,
      etcd,
      {
        image: options.image,
        port: options.port,
        agentEnv: sidecarSpec.env,
        // The token's, which prepare's configuration reads; not the sidecar's scratch directory.
        agentMounts: sidecarSpec.volumeMounts.filter((m) => (m as { name?: string }).name === TOKEN_VOLUME),
        resources: sidecarSpec.resources,
        runAs,
      },
      sidecar,
    );
  }

  if (etcd !== undefined) {
    const image = etcd.get('image');
    const probes = etcdProbes(
      {
        image: typeof image === 'string' ? image : undefined,
        metricsUrls: flagValue(etcd, 'listen-metrics-urls'),
        clientUrls: flagValue(etcd, 'listen-client-urls'),
        hostNetwork: listen.hostNetwork,
      },
      options.port,
      listen.probeHost,
    );
    if (!etcd.has('readinessProbe')) addProbe(doc, etcd, 'readinessProbe', probes.readiness, probes.readinessWhy);
    if (!etcd.has('livenessProbe') && probes.liveness !== undefined)
      addProbe(doc, etcd, 'livenessProbe', probes.liveness, probes.livenessWhy ?? '');
  }

  seqAt(podSpec, 'volumes').add(doc.createNode({ name: SCRATCH_VOLUME, emptyDir: {} }));
  if (options.tokenSecret !== undefined) {
    const secret = { secretName: options.tokenSecret, items: [{ key: 'token', path: 'token' }] };
    seqAt(podSpec, 'volumes').add(doc.createNode({ name: TOKEN_VOLUME, secret }));
  }
  restrictContainers(doc, podSpec);
  return true;
}

function hasContainerNamed(containers: unknown, name: string): boolean {
  return isSeq(containers) && containers.items.some((c) => isMap(c) && c.get('name') === name);
}

/** The container named `etcd`, else the first whose image contains `etcd`. */
function findEtcdContainer(containers: YAMLSeq): YAMLMap | undefined {
  const maps = containers.items.filter((c): c is YAMLMap => isMap(c));
  return (
    maps.find((c) => c.get('name') === 'etcd') ??
    maps.find((c) => {
      const image = c.get('image');
      return typeof image === 'string' && image.includes('etcd');
    })
  );
}

/** `probe` as the container's `key`, with `why` in the comment above it. */
function addProbe(doc: Document, container: YAMLMap, key: 'readinessProbe' | 'livenessProbe', probe: object, why: string): void {
  const name = new Scalar(key);
  name.commentBefore = ` ${why} (etcd-lifecycle-agent kube-inject)`;
  container.add(new Pair(name, doc.createNode(probe)));
}

/** The value the container gives etcd's `--<flag>` in its command or args, else its `ETCD_*` env twin. */
function flagValue(container: YAMLMap, flag: string): string | undefined {
  const words = [...stringsOf(container.get('command')), ...stringsOf(container.get('args'))].join(' ');
  const fromArgs = new RegExp(`--${flag}(?:=|\\s+)["']?([^\\s"']+)`).exec(words)?.[1];
  return fromArgs ?? envValue(container, `ETCD_${flag.toUpperCase().replace(/-/g, '_')}`);
}

/** True when the container sets etcd's `--<flag>` (or its `ETCD_*` env twin) to an https URL. */
function usesHttps(container: YAMLMap, flag: string): boolean {
  const words = [...stringsOf(container.get('command')), ...stringsOf(container.get('args'))].join(' ');
  const fromArgs = new RegExp(`--${flag}(?:=|\\s+)["']?(\\S+)`).exec(words)?.[1];
  const fromEnv = envValue(container, `ETCD_${flag.toUpperCase().replace(/-/g, '_')}`);
  return [fromArgs, fromEnv].some((value) => typeof value === 'string' && value.includes('https://'));
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

/** The first line of an error message, trimmed: kube-inject says what went wrong in one line. */
export function firstLine(message: string): string {
  return message.split('\n')[0].trim();
}
