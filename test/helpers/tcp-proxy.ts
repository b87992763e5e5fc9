/**
 * A TCP proxy in front of one etcd endpoint that a test can freeze: from then on
 * it forwards nothing, in either direction, like a network that went silent; or
 * make drop only the replies, so that a request is done and its answer lost; or slow to a
 * bandwidth, a link that still carries everything, slowly.
 * (etcd3's own tests simulate network faults the same way.)
 */
import net from 'node:net';

/** A running proxy: `url` to give the agent, `freeze` to silence it, `close` to stop it. */
export class TcpProxy {
  private frozen = false;
  private replies = true;
  private bytesPerSecond: number | undefined;
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

  /** From now on each direction of each connection carries at most `bytesPerSecond` (undefined: as fast as it can). */
  throttle(bytesPerSecond: number | undefined): void {
    this.bytesPerSecond = bytesPerSecond;
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

  /** Under a throttle, stops reading `from` for as long as `bytes` take at the allowed rate. */
  private pace(from: net.Socket, bytes: number): void {
    if (this.bytesPerSecond === undefined) return;
    from.pause();
    setTimeout(() => from.resume(), (bytes * 1000) / this.bytesPerSecond);
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
      // end, not destroy: what the upstream sent before it closed still reaches the client.
      client.end();
    });
    upstream.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
    client.on('data', (chunk) => {
      if (!this.frozen) upstream.write(chunk);
      this.pace(client, chunk.length);
    });
    upstream.on('data', (chunk) => {
      if (!this.frozen && this.replies) client.write(chunk);
      this.pace(upstream, chunk.length);
    });
  }
}
