import { etcdImageVersion, etcdProbes, kubeletPort } from '../../agent/cli/kube-inject-etcd-probes';

describe('the etcd version an image tag names', () => {
  it.each<[string | undefined, string | undefined]>([
    ['quay.io/coreos/etcd:v3.6.16', '3.6.16'],
    ['gcr.io/etcd-development/etcd:v3.5.21', '3.5.21'],
    ['registry.k8s.io/etcd:3.6.5-0', '3.6.5'],
    ['docker.io/bitnami/etcd:3.5.17-debian-12-r0', '3.5.17'],
    ['registry:5000/etcd:v3.7.3@sha256:0123abcd', '3.7.3'],
    ['registry:5000/etcd@sha256:0123abcd', undefined],
    ['etcd:latest', undefined],
    ['etcd', undefined],
    [undefined, undefined],
  ])('when the image is %j, then the version is %j', (image, version) => {
    expect(etcdImageVersion(image)).toBe(version);
  });
});

describe('the port the kubelet can probe', () => {
  it.each<[string | undefined, number | undefined]>([
    ['http://0.0.0.0:2381', 2381],
    ['http://127.0.0.1:2379,http://0.0.0.0:2379', 2379],
    ['http://[::]:2381', 2381],
    ['http://$(POD_IP):2381', 2381],
    ['http://127.0.0.1:2381', undefined],
    ['https://0.0.0.0:2379', undefined],
    [undefined, undefined],
  ])('when etcd listens on %j, then the probe port is %j', (urls, port) => {
    expect(kubeletPort(urls)).toBe(port);
  });
});

describe('the etcd container probes kube-inject adds', () => {
  const agent = '/v1/health/local?voter=true';
  // [what, site, readiness path and port, liveness path and port (none: undefined)]
  it.each<[string, Parameters<typeof etcdProbes>[0], [string, number], [string, number] | undefined]>([
    [
      'etcd 3.6 with a metrics URL',
      { image: 'quay.io/coreos/etcd:v3.6.16', metricsUrls: 'http://0.0.0.0:2381', clientUrls: 'http://0.0.0.0:2379', hostNetwork: false },
      ['/readyz', 2381],
      ['/livez', 2381],
    ],
    [
      'etcd 3.7, client URL only',
      { image: 'quay.io/coreos/etcd:v3.7.3', clientUrls: 'http://0.0.0.0:2379', hostNetwork: false },
      ['/readyz', 2379],
      ['/livez', 2379],
    ],
    [
      'etcd 3.5.19, the first with non_learner',
      { image: 'etcd:v3.5.19', metricsUrls: 'http://0.0.0.0:2381', hostNetwork: false },
      ['/readyz', 2381],
      ['/livez', 2381],
    ],
    [
      'etcd 3.5.17: /readyz passes a learner',
      { image: 'etcd:v3.5.17', metricsUrls: 'http://0.0.0.0:2381', hostNetwork: false },
      [agent, 3501],
      ['/livez', 2381],
    ],
    [
      'etcd 3.5.6 (KubeBlocks): no /livez',
      { image: 'etcd:3.5.6', clientUrls: 'http://0.0.0.0:2379', hostNetwork: false },
      [agent, 3501],
      ['/health?serializable=true', 2379],
    ],
    [
      'etcd 3.4',
      { image: 'quay.io/coreos/etcd:v3.4.23', clientUrls: 'http://0.0.0.0:2379', hostNetwork: false },
      [agent, 3501],
      ['/health?serializable=true', 2379],
    ],
    [
      'an image without a version',
      { image: 'registry/etcd@sha256:00', metricsUrls: 'http://0.0.0.0:2381', hostNetwork: false },
      [agent, 3501],
      ['/health?serializable=true', 2381],
    ],
    [
      'etcd 3.6 served over TLS only',
      { image: 'etcd:v3.6.16', clientUrls: 'https://0.0.0.0:2379', hostNetwork: false },
      [agent, 3501],
      undefined,
    ],
    [
      'etcd 3.6 on the host network',
      { image: 'etcd:v3.6.16', metricsUrls: 'http://0.0.0.0:2381', hostNetwork: true },
      [agent, 3501],
      undefined,
    ],
    ['no flags to read (a start script)', { image: 'etcd:v3.6.16', hostNetwork: false }, [agent, 3501], undefined],
  ])('when %s, then readiness and liveness are as the table says', (_what, site, [readyPath, readyPort], live) => {
    const probes = etcdProbes(site, 3501);

    expect(probes.readiness.httpGet).toEqual({ path: readyPath, port: readyPort });
    expect(probes.liveness?.httpGet).toEqual(live === undefined ? undefined : { path: live[0], port: live[1] });
    expect(probes.readinessWhy.length).toBeGreaterThan(0);
  });

  it('when the agent is reached at a host (host network), then its readiness probe carries it', () => {
    const probes = etcdProbes({ image: 'etcd:v3.6.16', hostNetwork: true }, 3501, { host: '127.0.0.1' });
    expect(probes.readiness.httpGet).toEqual({ path: '/v1/health/local?voter=true', port: 3501, host: '127.0.0.1' });
  });
});
