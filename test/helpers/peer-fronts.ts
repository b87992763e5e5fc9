/**
 * TCP fronts for etcd peer ports, to cut one member off from the others' raft traffic while its
 * client port keeps answering (a learner that falls behind but still answers Status).
 *
 * Each member advertises its front's URL and listens on a backend port behind it. etcd's raft
 * transport names the sending member in every request (`X-Server-From: <hex id>`, on streams,
 * pipeline posts and snapshots), and a member receives the leader's appends on a stream that it
 * dialled itself. So isolating member X means: its own front refuses everything, and every other
 * front refuses connections from X.
 */
import net from 'node:net';
import type { MemberSpec } from '../../scripts/local-cluster';
import { freePort } from './etcd-cluster';

interface Front {
  server: net.Server;
  name: string;
  backendPort: number;
}

interface Link {
  owner: string;
  from?: string;
  sockets: net.Socket[];
}

/** The fronts of one cluster, and which members are isolated. */
export class PeerFronts {
  private readonly fronts = new Map<string, Front>();
  private readonly links = new Set<Link>();
  private readonly isolated = new Map<string, string | undefined>();
  private readonly backends = new Map<string, number>();

  /**
   * For LocalClusterOptions.memberArgs: reserves the member's backend port ahead (`prepare`),
   * starts its front on the advertised peer URL and makes etcd listen on the backend instead.
   */
  memberArgs = (member: MemberSpec): string[] => {
    const backendPort = this.backends.get(member.name);
    if (backendPort === undefined) throw new Error(`call prepare("${member.name}") before starting ${member.name}`);
    if (!this.fronts.has(member.name)) this.open(member.name, Number(new URL(member.peerURL).port), backendPort);
    return [`--listen-peer-urls=http://127.0.0.1:${backendPort}`];
  };

  /** Picks the backend port of each named member before its process starts. */
  async prepare(...names: string[]): Promise<void> {
    for (const name of names) if (!this.backends.has(name)) this.backends.set(name, await freePort());
  }

  /** Cuts member `name` (hex id `id`) off from its peers, dropping the connections it has. */
  isolate(name: string, id: string): void {
    this.isolated.set(name, id.toLowerCase());
    for (const link of this.links) if (this.blocked(link)) this.drop(link);
  }

  /** Lets member `name` talk to its peers again. */
  heal(name: string): void {
    this.isolated.delete(name);
  }

  /** Closes every front and connection. */
  async close(): Promise<void> {
    for (const link of this.links) this.drop(link);
    await Promise.all([...this.fronts.values()].map((f) => new Promise<void>((resolve) => f.server.close(() => resolve()))));
    this.fronts.clear();
  }

  private blocked(link: Link): boolean {
    if (this.isolated.has(link.owner)) return true;
    return link.from !== undefined && [...this.isolated.values()].includes(link.from);
  }

  private drop(link: Link): void {
    for (const socket of link.sockets) socket.destroy();
    this.links.delete(link);
  }

  private open(name: string, frontPort: number, backendPort: number): void {
    const server = net.createServer((client) => this.accept(name, backendPort, client));
    server.on('error', (err) => process.stderr.write(`peer front of ${name}: ${err.message}\n`));
    server.listen(frontPort, '127.0.0.1');
    this.fronts.set(name, { server, name, backendPort });
  }

  /** Reads the request head to learn the sender, then pipes to the backend unless that link is cut. */
  private accept(owner: string, backendPort: number, client: net.Socket): void {
    const link: Link = { owner, sockets: [client] };
    this.links.add(link);
    client.on('error', () => this.drop(link));
    client.on('close', () => this.drop(link));
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const text = head.toString('latin1');
      if (!text.includes('\r\n\r\n') && head.length < 16_384) return;
      client.off('data', onData);
      client.pause();
      link.from = /^x-server-from:\s*([0-9a-f]+)\s*$/im.exec(text)?.[1]?.toLowerCase();
      if (this.blocked(link)) return this.drop(link);
      const upstream = net.connect(backendPort, '127.0.0.1', () => {
        upstream.write(head);
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
      link.sockets.push(upstream);
      upstream.on('error', () => this.drop(link));
      upstream.on('close', () => this.drop(link));
    };
    client.on('data', onData);
  }
}
