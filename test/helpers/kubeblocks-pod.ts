/**
 * What KubeBlocks gives each pod of a Component built from a ComponentDefinition, as read in its
 * source (apecloud/kubeblocks v1.0.2): the definition's `vars` resolved for the Component
 * (pkg/controller/component/vars.go: `valueFrom` references, then each `expression` in order, a Go
 * text/template with sprig functions and missingkey=error over all the vars' values), the pod FQDNs
 * (pkg/controllerutil `PodFQDN`), a container's environment with `$(VAR)` expanded as the kubelet does
 * (the vars are injected into every container, kbagent's included: `InjectEnvVars`), and the
 * parameters of an action call (the vars, then the action's own `KB_*` parameters:
 * pkg/controller/lifecycle/kbagent.go, "template vars take precedence").
 *
 * The expressions are rendered by a Go template engine, not by this file: `render` is given (the
 * end-to-end test renders them with the real kbagent, whose HTTP action bodies use the same
 * text/template + sprig + missingkey=error as KubeBlocks' vars).
 */

// Definitions are looked into field by field.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Spec = any;

/** One Component of a Cluster, at one moment. */
export interface ComponentContext {
  namespace: string;
  cluster: string;
  component: string;
  clusterDomain: string;
  /** The Component's pods at that moment, in ordinal order. */
  pods: string[];
  /** The Component's TLS config: absent, or enabled. */
  tls: boolean;
}

/** Renders a Go template over string data (missingkey=error). */
export type RenderTemplate = (template: string, data: Record<string, string>) => Promise<string>;

/** `<cluster>-<component>`, the Component object's name. */
export function fullComponentName(ctx: ComponentContext): string {
  return `${ctx.cluster}-${ctx.component}`;
}

/** A pod's name: `<cluster>-<component>-<ordinal>`. */
export function podName(ctx: Pick<ComponentContext, 'cluster' | 'component'>, ordinal: number): string {
  return `${ctx.cluster}-${ctx.component}-${ordinal}`;
}

/** A pod's FQDN: `<pod>.<cluster>-<component>-headless.<namespace>.svc.<cluster domain>`. */
export function podFqdn(ctx: ComponentContext, pod: string): string {
  return `${pod}.${fullComponentName(ctx)}-headless.${ctx.namespace}.svc.${ctx.clusterDomain}`;
}

/** The value of one `valueFrom` reference, or undefined when it resolves to nothing (an optional one). */
function resolveReference(name: string, from: Spec, ctx: ComponentContext): string | undefined {
  if (from.clusterVarRef !== undefined) {
    if (from.clusterVarRef.clusterName !== undefined) return ctx.cluster;
    if (from.clusterVarRef.namespace !== undefined) return ctx.namespace;
  }
  if (from.componentVarRef !== undefined) {
    const ref = from.componentVarRef;
    if (ref.podFQDNs !== undefined) return ctx.pods.map((p) => podFqdn(ctx, p)).join(',');
    if (ref.componentName !== undefined) return fullComponentName(ctx);
    if (ref.replicas !== undefined) return String(ctx.pods.length);
    // No pod carries a role label in this model: the list of pods with the role is empty.
    if (ref.podFQDNsForRole !== undefined) return '';
  }
  // No LoadBalancer Service (the addon's PEER_ENDPOINT): the optional reference resolves to nothing.
  if (from.serviceVarRef !== undefined && from.serviceVarRef.optional === true) return undefined;
  // "true"/"false" once the Component has a TLS config; nothing without one.
  if (from.tlsVarRef?.enabled !== undefined) return ctx.tls ? 'true' : undefined;
  throw new Error(`var ${name}: valueFrom ${JSON.stringify(from)} is not modelled (test/helpers/kubeblocks-pod.ts)`);
}

/** The definition's vars as KubeBlocks resolves them for `ctx`: name → value, unresolved optional ones absent. */
export async function resolveVars(spec: Spec, ctx: ComponentContext, render: RenderTemplate): Promise<Record<string, string>> {
  const values: Record<string, string> = {};
  for (const v of spec.vars ?? []) {
    const value = v.valueFrom !== undefined ? resolveReference(v.name, v.valueFrom, ctx) : (v.value ?? '');
    if (value !== undefined) values[v.name] = value;
  }
  // evaluateObjectVarsExpression: in definition order, each over every var's current value.
  for (const v of spec.vars ?? []) {
    if (v.expression === undefined || v.expression === '') continue;
    values[v.name] = await render(v.expression, { ...values });
  }
  return values;
}

/** Kubernetes' `$(VAR)` expansion: defined names are replaced, `$$(` escapes, others stay as written. */
export function expand(value: string, defined: Record<string, string>): string {
  return value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (whole, name: string | undefined) => {
    if (whole === '$$') return '$';
    return name !== undefined && name in defined ? defined[name] : whole;
  });
}

/** What a pod's downward API gives its containers. */
export interface PodFields {
  name: string;
  ip: string;
  hostIp: string;
  namespace: string;
}

/**
 * The environment of container `name` of a pod: the vars (KubeBlocks injects them first), then the
 * container's own `env`, each expanded over what is defined before it, `fieldRef`s from the pod.
 */
export function containerEnv(spec: Spec, name: string, vars: Record<string, string>, pod: PodFields): Record<string, string> {
  const container = (spec.runtime?.containers ?? []).find((c: Spec) => c.name === name);
  if (container === undefined) throw new Error(`no container ${name}`);
  const FIELDS: Record<string, string> = {
    'metadata.name': pod.name,
    'metadata.namespace': pod.namespace,
    'status.podIP': pod.ip,
    'status.hostIP': pod.hostIp,
  };
  const env: Record<string, string> = { ...vars };
  for (const e of container.env ?? []) {
    if (e.valueFrom !== undefined) {
      const field = e.valueFrom.fieldRef?.fieldPath;
      if (field === undefined || !(field in FIELDS))
        throw new Error(`${name}: env ${e.name} from ${JSON.stringify(e.valueFrom)} is not modelled`);
      env[e.name] = FIELDS[field];
    } else {
      env[e.name] = expand(e.value ?? '', env);
    }
  }
  return env;
}

/** The parameters of an action call: the vars, and the action's own parameters where no var has the name. */
export function actionParameters(vars: Record<string, string>, own: Record<string, string>): Record<string, string> {
  const parameters = { ...vars };
  for (const [k, v] of Object.entries(own)) if (!(k in parameters)) parameters[k] = v;
  return parameters;
}
