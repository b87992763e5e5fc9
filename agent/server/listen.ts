/**
 * Listening and stopping: the HTTP(S) server of an app, and a shutdown that
 * stops accepting, lets in-flight calls finish for a grace period, then cuts them.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestListener } from 'node:http';
import type { Config } from '../config';

/** A listening server and how to stop it. */
export interface Listening {
  server: http.Server;
  /** Base URL for clients, e.g. http://127.0.0.1:3501. */
  url: string;
  port: number;
  /** Stops accepting; waits up to `graceMs` for in-flight requests, then closes every connection. */
  close(graceMs?: number): Promise<void>;
}

/** Starts the HTTP server of `app` on the configured address. */
export async function listen(app: RequestListener, config: Pick<Config, 'listen'>): Promise<Listening> {
  const server = http.createServer({ keepAliveTimeout: 5000 }, app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.listen.port, config.listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const clientHost = host === '0.0.0.0' ? '127.0.0.1' : host === '[::]' ? '[::1]' : host;
  return {
    server,
    url: `http://${clientHost}:${address.port}`,
    port: address.port,
    close: (graceMs = 5000) => closeServer(server, graceMs),
  };
}

function closeServer(server: http.Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => server.closeAllConnections(), graceMs);
    timer.unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}
