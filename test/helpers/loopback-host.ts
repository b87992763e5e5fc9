/**
 * A loopback address whose port 2380 is free, to stand in for a pod's FQDN:
 * the kbagent route and the scripts derive the peer URL `http://{fqdn}:2380`
 * (docs/api.md §5), and every 127.x.y.z address reaches this host on Linux, so an
 * etcd member can really listen there.
 */
import net from 'node:net';

/** The peer port the kbagent route appends to an FQDN. */
export const KB_PEER_PORT = 2380;

function bindable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/** A random 127.x.y.z (x ≥ 100, away from 127.0.0.1) whose port 2380 is free now. */
export async function freeLoopbackHost(): Promise<string> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const octet = (min: number): number => min + Math.floor(Math.random() * (255 - min));
    const host = `127.${octet(100)}.${octet(1)}.${octet(1)}`;
    if (await bindable(host, KB_PEER_PORT)) return host;
  }
  throw new Error(`no loopback address with a free port ${KB_PEER_PORT} found`);
}
