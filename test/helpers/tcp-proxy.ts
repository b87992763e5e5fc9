/**
 * A TCP proxy in front of one etcd endpoint that a test can freeze: from then on
 * it forwards nothing, in either direction, like a network that went silent; or
 * make drop only the replies, so that a request is done and its answer lost.
 * (etcd3's own tests simulate network faults the same way.)
 */
import net from 'node:net';

/** A running proxy: `url` to give the agent, `freeze` to silence it, `close` to stop it. */
export class TcpProxy {
  private frozen = false;
  private replies = true;
  private readonly sockets = new Set<net.Socket>();
  private readonly server: net.Server;
  private readonly target: URL;
  url = '';

  private constructor(target: string) {
    this.target = new URL(target);
    this.server = net.createServer((client) => this.accept(client));
  }

  /** Listens on a free loopback port and forwards every connection to `target` (http://host:port). */
  static async start(target: string): Promise<TcpProxy> {
    const proxy = new TcpProxy(target);
    await new Promise<void>((resolve, reject) => {
      proxy.server.once('error', reject);
      proxy.server.listen(0, '127.0.0.1', () => resolve());
    });
    proxy.url = `http://127.0.0.1:${(proxy.server.address() as net.AddressInfo).port}`;
    return proxy;
  }

  /** From now on no byte passes, and new connections hang; existing ones stay open. */
  freeze(): void {
    this.frozen = true;
  }

  /** Undoes `freeze` for new connections (those accepted while frozen stay silent). */
  thaw(): void {
    this.frozen = false;
  }

  /** From now on requests still pass but no reply comes back: a request is carried out, its answer lost. */
  dropReplies(): void {
    this.replies = false;
  }

  /** Closes the listener and every connection. */
  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    this.sockets.add(client);
    client.on('close', () => this.sockets.delete(client));
    client.on('error', () => client.destroy());
    if (this.frozen) return; // accepted, never answered
    const upstream = net.connect(Number(this.target.port), this.target.hostname);
    this.sockets.add(upstream);
    upstream.on('close', () => {
      this.sockets.delete(upstream);
      client.destroy();
    });
    upstream.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
    client.on('data', (chunk) => {
      if (!this.frozen) upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!this.frozen && this.replies) client.write(chunk);
    });
  }
}
