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
/**
 * Parallel jest workers (JEST_WORKER_ID 1, 2, …) each pick from their own slice of that range: a
 * member a test stops and starts again keeps its ports, which are free while it is down, and a
 * suite in another worker must not take them meanwhile (a restart then failed "address already in
 * use"). Within one process no port is handed out twice, for the same reason.
 */
const SLICES = 8;
const handedOut = new Set<number>();
/**
 * Ports the Fetch standard blocks ("bad ports"): Node's `fetch` refuses them with "bad port" before
 * connecting, so a test that fetches a member's URL failed when a pick landed on one (10080 lies in
 * worker 1's slice). Never handed out. The list is the standard's, above 1024.
 */
export const FETCH_BLOCKED_PORTS: ReadonlySet<number> = new Set([
  1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
]);

/** The ports this process picks from: its worker's slice, or the whole range outside jest's workers. */
export function pickRange(below: number): [from: number, to: number] {
  const worker = Number(process.env.JEST_WORKER_ID);
  if (!Number.isInteger(worker) || worker < 1) return [PICK_FROM, below];
  const size = Math.floor((below - PICK_FROM) / SLICES);
  const from = PICK_FROM + ((worker - 1) % SLICES) * size;
  return [from, from + size];
}

/** The first port of the kernel's ephemeral range (the default when it cannot be read). */
export function ephemeralStart(): number {
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
  const [from, to] = pickRange(ephemeralStart());
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      let port: number | undefined;
      for (let attempt = 0; port === undefined && to - from > 500 && attempt < PICK_ATTEMPTS; attempt++) {
        const candidate = from + Math.floor(Math.random() * (to - from));
        if (handedOut.has(candidate) || FETCH_BLOCKED_PORTS.has(candidate)) continue;
        const server = net.createServer();
        port = await listenOn(server, host, candidate).catch(() => undefined);
        if (port !== undefined) servers.push(server);
      }
      if (port === undefined) {
        const server = net.createServer();
        servers.push(server);
        port = await listenOn(server, host, 0);
      }
      handedOut.add(port);
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
