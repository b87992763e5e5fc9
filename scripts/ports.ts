import fs from 'node:fs';
import net from 'node:net';

/**
 * Where listening ports are picked: below the kernel's ephemeral range (net.ipv4.ip_local_port_range,
 * 32768–60999 by default), from which every outgoing connection on the machine takes its source
 * port. A port picked there (what binding port 0 gives) could be taken by any process's next
 * connection before etcd binds it, and the more connections the machine makes (parallel test
 * workers, other test runs), the likelier that was: etcd then exits "bind: address already in use",
 * and a peer URL already in the member list cannot move. Below that range only a listener can take
 * a port, and a random pick makes two runs choosing the same one at the same moment unlikely.
 */
const PICK_FROM = 10_000;
const PICK_ATTEMPTS = 50;

/** The first port of the kernel's ephemeral range (the default when it cannot be read). */
function ephemeralStart(): number {
  try {
    const start = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(start) && start > 0) return start;
  } catch {
    // not Linux: the IANA dynamic range
  }
  return 32_768;
}

/**
 * Finds `count` distinct free TCP ports on `host`: random ports below the ephemeral range, each
 * checked by binding it (port 0, the kernel's choice, when that range is too small or full).
 * The sockets are held open together so no port is returned twice; they are closed before
 * returning, so another listener may still take a port before the caller binds it (callers that
 * start servers should retry on "address already in use").
 */
export async function freePorts(count: number, host = '127.0.0.1'): Promise<number[]> {
  const servers: net.Server[] = [];
  const below = ephemeralStart();
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      let port: number | undefined;
      for (let attempt = 0; port === undefined && below - PICK_FROM > 1000 && attempt < PICK_ATTEMPTS; attempt++) {
        const candidate = PICK_FROM + Math.floor(Math.random() * (below - PICK_FROM));
        const server = net.createServer();
        port = await listenOn(server, host, candidate).catch(() => undefined);
        if (port !== undefined) servers.push(server);
      }
      if (port === undefined) {
        const server = net.createServer();
        servers.push(server);
        port = await listenOn(server, host, 0);
      }
      ports.push(port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }
}

/** Finds one free TCP port on `host` (see {@link freePorts} for the caveat). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const [port] = await freePorts(1, host);
  return port;
}

function listenOn(server: net.Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host, exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        reject(new Error(`cannot read the port bound on ${host}`));
        return;
      }
      resolve(address.port);
    });
  });
}
