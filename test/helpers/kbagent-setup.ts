/**
 * How KubeBlocks sets up a pod's kbagent from a ComponentDefinition, as read in its source
 * (apecloud/kubeblocks v1.0.2, pkg/controller/component/kbagent.go `buildKBAgentStartupEnvs`,
 * `buildAction4KBAgent`, `buildProbe4KBAgent`, `getAvailablePorts`; pkg/kbagent/setup.go
 * `BuildEnv4Server`): its `KB_AGENT_ACTION`, `KB_AGENT_PROBE` and `KB_AGENT_STREAMING` from
 * `lifecycleActions`, and its ports. Facts carried over into a test helper, no code of KubeBlocks: the
 * end-to-end test starts the real kbagent with what this returns for deploy/kubeblocks-componentdefinition.yaml.
 */

// A ComponentDefinition's spec is looked into field by field.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Spec = any;

/** The lifecycle actions in the order buildKBAgentStartupEnvs adds them, with the name kbagent knows. */
const ACTIONS = [
  'postProvision',
  'preTerminate',
  'switchover',
  'memberJoin',
  'memberLeave',
  'readonly',
  'readwrite',
  'dataDump',
  'dataLoad',
  'reconfigure',
  'accountProvision',
];
/** Actions whose output kbagent streams. */
const STREAMING = new Set(['dataDump', 'dataLoad']);
/** probeReportPeriodSeconds: the availableProbe's report period, from its period. */
const DEFAULT_PROBE_REPORT_PERIOD_SECONDS = 60;
const MIN_PROBE_REPORT_PERIOD_SECONDS = 15;
/** kbagent's own ports, and the lowest port it may move to. */
export const KBAGENT_HTTP_PORT = 3501;
export const KBAGENT_STREAMING_PORT = 3502;
const MIN_AVAILABLE_PORT = 1025;

/** proto.Action as Go's json.Marshal writes it (omitempty fields absent). */
function protoAction(action: Spec, name: string): Record<string, unknown> | undefined {
  if (action === undefined || (action.exec === undefined && action.http === undefined && action.grpc === undefined)) return undefined;
  const out: Record<string, unknown> = { name };
  if (action.exec !== undefined) {
    out.exec = {
      ...(action.exec.command?.length ? { command: action.exec.command } : {}),
      ...(action.exec.args?.length ? { args: action.exec.args } : {}),
    };
  }
  if (action.http !== undefined) {
    const h = action.http;
    out.http = {
      port: h.port,
      ...(h.host ? { host: h.host } : {}),
      ...(h.scheme ? { scheme: h.scheme } : {}),
      ...(h.path ? { path: h.path } : {}),
      ...(h.method ? { method: h.method } : {}),
      ...(h.body ? { body: h.body } : {}),
      ...(h.headers?.length ? { headers: h.headers.map((x: Spec) => ({ name: x.name, value: x.value })) } : {}),
    };
  }
  if (action.grpc !== undefined) throw new Error(`${name}: gRPC actions are not modelled here`);
  if (action.timeoutSeconds) out.timeoutSeconds = action.timeoutSeconds;
  if (action.retryPolicy !== undefined) {
    // v1.0.2's RetryPolicy: maxRetries and retryInterval (a Go duration, nanoseconds); kbagent v1.0.2 ignores it.
    const { maxRetries, retryInterval } = action.retryPolicy;
    out.retryPolicy = { ...(maxRetries ? { maxRetries } : {}), ...(retryInterval ? { retryInterval } : {}) };
  }
  return out;
}

/** proto.Probe of a probe action. */
function protoProbe(probe: Spec, name: string, instance: string): Record<string, unknown> {
  return {
    instance,
    action: name,
    ...(probe.initialDelaySeconds ? { initialDelaySeconds: probe.initialDelaySeconds } : {}),
    ...(probe.periodSeconds ? { periodSeconds: probe.periodSeconds } : {}),
    ...(probe.successThreshold ? { successThreshold: probe.successThreshold } : {}),
    ...(probe.failureThreshold ? { failureThreshold: probe.failureThreshold } : {}),
  };
}

function probeReportPeriodSeconds(periodSeconds: number | undefined): number {
  if (periodSeconds === undefined || periodSeconds <= 0) return DEFAULT_PROBE_REPORT_PERIOD_SECONDS;
  return Math.max(periodSeconds, MIN_PROBE_REPORT_PERIOD_SECONDS);
}

/**
 * kbagent's KB_AGENT_ACTION, KB_AGENT_PROBE and KB_AGENT_STREAMING for a Component of `spec`
 * (`instance`: the Component's full name, `<cluster>-<component>`).
 */
export function kbAgentServerEnv(spec: Spec, instance: string): Record<string, string> {
  const lifecycle = spec.lifecycleActions ?? {};
  const actions: Array<Record<string, unknown>> = [];
  const probes: Array<Record<string, unknown>> = [];
  const streaming: string[] = [];
  for (const name of ACTIONS) {
    const action = protoAction(lifecycle[name], name);
    if (action === undefined) continue;
    actions.push(action);
    if (STREAMING.has(name)) streaming.push(name);
  }
  for (const name of ['roleProbe', 'availableProbe']) {
    const action = protoAction(lifecycle[name], name);
    if (action === undefined) continue;
    const probe = protoProbe(lifecycle[name], name, instance);
    if (name === 'availableProbe') probe.reportPeriodSeconds = probeReportPeriodSeconds(lifecycle[name].periodSeconds);
    actions.push(action);
    probes.push(probe);
  }
  return {
    KB_AGENT_ACTION: JSON.stringify(actions),
    KB_AGENT_PROBE: JSON.stringify(probes),
    ...(streaming.length > 0 ? { KB_AGENT_STREAMING: streaming.join(',') } : {}),
  };
}

/** kbagent's HTTP and streaming ports: the first free ones from 3501 and 3502 up, past every container's ports. */
export function kbAgentPorts(spec: Spec): { http: number; streaming: number } {
  const inUse = new Set<number>();
  for (const container of spec.runtime?.containers ?? []) for (const p of container.ports ?? []) inUse.add(p.containerPort);
  const next = (port: number): number => {
    let p = port < MIN_AVAILABLE_PORT ? MIN_AVAILABLE_PORT : port;
    while (inUse.has(p)) p++;
    inUse.add(p);
    return p;
  };
  return { http: next(KBAGENT_HTTP_PORT), streaming: next(KBAGENT_STREAMING_PORT) };
}
