/**
 * What the kbagent end-to-end test gives kbagent and the pods, derived from
 * deploy/kubeblocks-componentdefinition.yaml as KubeBlocks derives it (test/helpers/kbagent-setup.ts,
 * kubeblocks-pod.ts): checked here without starting anything.
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { kbAgentPorts, kbAgentServerEnv } from '../helpers/kbagent-setup';
import { actionParameters, containerEnv, expand, podFqdn } from '../helpers/kubeblocks-pod';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const spec: any = (YAML.parse(fs.readFileSync(path.join(__dirname, '../../deploy/kubeblocks-componentdefinition.yaml'), 'utf8')) as any)
  .spec;

describe("KubeBlocks' setup of kbagent and the pods, from the ComponentDefinition", () => {
  it('when kbagent is set up, then it gets the actions in buildKBAgentStartupEnvs order, both probes, the streaming actions and ports 3502/3503 (3501 is the agent’s)', () => {
    const env = kbAgentServerEnv(spec, 'etcd-e2e-etcd');
    const actions = JSON.parse(env.KB_AGENT_ACTION);
    const probes = JSON.parse(env.KB_AGENT_PROBE);

    expect(actions.map((a: { name: string }) => a.name)).toEqual([
      'switchover',
      'memberJoin',
      'memberLeave',
      'roleProbe',
      'availableProbe',
    ]);
    expect(actions[1]).toEqual({
      name: 'memberJoin',
      http: {
        port: '3501',
        path: '/v1/members/join',
        method: 'POST',
        body: spec.lifecycleActions.memberJoin.http.body,
        headers: [{ name: 'Content-Type', value: 'application/json' }],
      },
      timeoutSeconds: 10,
    });
    expect(probes).toEqual([
      { instance: 'etcd-e2e-etcd', action: 'roleProbe', initialDelaySeconds: 10, periodSeconds: 5 },
      {
        instance: 'etcd-e2e-etcd',
        action: 'availableProbe',
        periodSeconds: 5,
        successThreshold: 1,
        failureThreshold: 1,
        reportPeriodSeconds: 15,
      },
    ]);
    expect(env.KB_AGENT_STREAMING).toBeUndefined();
    expect(kbAgentPorts(spec)).toEqual({ http: 3502, streaming: 3503 });
  });

  it.each([
    ['a defined name', '$(A)://x', 'http://x'],
    ['an undefined name, kept as written', '$(B)/y', '$(B)/y'],
    ['an escaped reference', '$$(A)', '$(A)'],
    ['several', '$(A),$(A)', 'http,http'],
  ])("when a container's env value has %s, then the kubelet's expansion gives what it gives", (_what, value, expanded) => {
    expect(expand(value, { A: 'http' })).toBe(expanded);
  });

  it("when the sidecar's environment is derived for a pod, then its etcd endpoints, peer URL template and TLS files come from the vars", () => {
    const vars = {
      CLIENT_SCHEME: 'https',
      CLIENT_ENDPOINTS: 'https://a.h.ns.svc.cluster.local:2379',
      PEER_URL_TEMPLATE: 'https://{name}.h.ns.svc.cluster.local:2380',
      CLIENT_CA_FILE: '/etc/pki/tls/ca.pem',
      CLIENT_CERT_FILE: '/etc/pki/tls/cert.pem',
      CLIENT_KEY_FILE: '/etc/pki/tls/key.pem',
    };
    const env = containerEnv(spec, 'etcd-lifecycle-agent', vars, { name: 'a', ip: '198.18.1.11', hostIp: '198.18.1.1', namespace: 'ns' });

    expect(env).toMatchObject({
      POD_NAME: 'a',
      POD_IP: '198.18.1.11',
      HOST_IP: '198.18.1.1',
      ETCD_AGENT_MEMBER_NAME: 'a',
      ETCD_AGENT_LOCAL_ENDPOINT: 'https://127.0.0.1:2379',
      ETCD_AGENT_ENDPOINTS: 'https://127.0.0.1:2379,https://a.h.ns.svc.cluster.local:2379',
      ETCD_AGENT_PEER_URL_TEMPLATE: 'https://{name}.h.ns.svc.cluster.local:2380',
      ETCD_AGENT_ETCD_CA_FILE: '/etc/pki/tls/ca.pem',
    });
  });

  it('when an action is called, then the vars take precedence over its own parameters of the same name, and FQDNs have KubeBlocks’ form', () => {
    const ctx = { namespace: 'demo', cluster: 'c', component: 'etcd', clusterDomain: 'cluster.local', pods: ['c-etcd-0'], tls: false };

    expect(actionParameters({ X: 'var', PEER_SCHEME: 'http' }, { X: 'own', KB_JOIN_MEMBER_POD_NAME: 'c-etcd-3' })).toEqual({
      X: 'var',
      PEER_SCHEME: 'http',
      KB_JOIN_MEMBER_POD_NAME: 'c-etcd-3',
    });
    expect(podFqdn(ctx, 'c-etcd-3')).toBe('c-etcd-3.c-etcd-headless.demo.svc.cluster.local');
  });
});
