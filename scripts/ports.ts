import net from 'node:net';

/**
 * Finds `count` distinct free TCP ports on `host` by binding port 0.
 * The sockets are held open together so the kernel cannot hand out the same port twice;
 * they are closed before returning, so another process may still take a port before the
 * caller binds it (callers that start servers should retry on "address already in use").
 */
export async function freePorts(count: number, host = '127.0.0.1'): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = net.createServer();
      servers.push(server);
      ports.push(await listenOnAnyPort(server, host));
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

function listenOnAnyPort(server: net.Server, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: 0, host, exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        reject(new Error(`cannot read the port bound on ${host}`));
        return;
      }
      resolve(address.port);
    });
  });
}
