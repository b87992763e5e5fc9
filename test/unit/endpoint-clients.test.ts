/**
 * The etcd3 clients EndpointClients builds, as gRPC holds them: every channel waits at most
 * RECONNECT_BACKOFF_MS.max between connection attempts, no longer than the default health max age,
 * so a member that comes back is connected again within about one observation rather than after
 * gRPC's own backoff of up to 120 s. The one call made goes to a port nothing listens on.
 */
import net from 'node:net';
import { EndpointClients, RECONNECT_BACKOFF_MS } from '../../agent/etcd/endpoint-clients';
import { SETTINGS } from '../../agent/config/settings';

/** A loopback URL whose port was free a moment ago: connections to it are refused. */
async function refusedUrl(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

/** The gRPC channel options of a built client's first service client, which its first call makes. */
interface Channel {
  internalChannel: { options: Record<string, unknown> };
}

describe('EndpointClients', () => {
  it('keeps the reconnection backoff at or below the default health max age', () => {
    const maxAge = SETTINGS.find((s) => s.variable === 'ETCD_AGENT_HEALTH_MAX_AGE_MS');
    expect(RECONNECT_BACKOFF_MS.initial).toBeLessThanOrEqual(RECONNECT_BACKOFF_MS.max);
    expect(RECONNECT_BACKOFF_MS.max).toBeLessThanOrEqual(Number(maxAge?.default));
  });

  it.each([
    ['with etcd credentials', true],
    ['for Status, without them', false],
  ])('builds each client %s with that backoff on its gRPC channel', async (_name, authenticated) => {
    const url = await refusedUrl();
    const clients = new EndpointClients({ endpoints: [url] }, 200);
    const client = clients.get(url, authenticated);
    const host = (client as unknown as { pool: { hosts: Array<{ cachedServices: Record<string, { getChannel(): Channel }> }> } }).pool
      .hosts[0];
    // Settled before any assertion, so that a failed one does not leave the refusal unhandled.
    const refused = client.maintenance.status({ deadline: new Date(Date.now() + 200) }).then(
      () => 'answered',
      (error: Error) => error.message,
    );
    await new Promise((resolve) => setImmediate(resolve));
    const services = Object.values(host.cachedServices);
    expect(services).toHaveLength(1);
    expect(services[0].getChannel().internalChannel.options).toMatchObject({
      'grpc.initial_reconnect_backoff_ms': RECONNECT_BACKOFF_MS.initial,
      'grpc.max_reconnect_backoff_ms': RECONNECT_BACKOFF_MS.max,
    });
    expect(await refused).toMatch(/ECONNREFUSED|DEADLINE_EXCEEDED/);
    clients.close();
  });
});
