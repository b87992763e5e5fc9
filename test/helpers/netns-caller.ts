/**
 * A caller inside a network namespace of the run (netns.ts), for the test process outside it: a relay
 * (netns-relay.js) started in the namespace listens on a Unix socket, and each request the test sends
 * there leaves from the namespace's own address, as a controller's or another pod's would.
 */
import { type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { goHttpRequest } from './go-wire';
import type { Netns, PodNetwork } from './netns';
import { rawRequestAt, type RawAnswer } from './raw-http';

/** Requests sent from inside one namespace. */
export class NetnsCaller {
  private constructor(
    readonly ns: Netns,
    private readonly socket: string,
    private readonly relay: ChildProcess,
  ) {}

  /** Starts the relay in `ns`, its socket in `dir`. */
  static async start(network: PodNetwork, ns: Netns, dir: string): Promise<NetnsCaller> {
    const socket = path.join(dir, 'relay.sock');
    const relay = network.spawn(ns, process.execPath, [path.join(__dirname, 'netns-relay.js'), socket], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve, reject) => {
      relay.stdout?.once('data', () => resolve());
      relay.once('exit', (code) => reject(new Error(`the relay in ${ns.name} exited (${code})`)));
    });
    return new NetnsCaller(ns, socket, relay);
  }

  /**
   * Sends `bytes` to `host:port` from inside the namespace and reads the answer. With `dropReply`, the
   * server gets the whole request and answers, but the answer is thrown away and the connection closed
   * (`noAnswer` true): a reply lost on its way back.
   */
  send(host: string, port: number, bytes: Buffer, opts: { dropReply?: boolean; timeoutMs?: number } = {}): Promise<RawAnswer> {
    const head = `${opts.dropReply === true ? 'DROP-REPLY' : 'CONNECT'} ${host}:${port}\n`;
    return rawRequestAt({ path: this.socket }, [head, bytes], opts.timeoutMs ?? 30_000);
  }

  /** An HTTP request as Go's client writes it (no Content-Type unless `headers` has one). */
  http(
    host: string,
    port: number,
    method: string,
    target: string,
    body = '',
    headers: Array<{ name: string; value: string }> = [],
  ): Promise<RawAnswer> {
    return this.send(host, port, goHttpRequest(method, host, port, target, headers, body));
  }

  /** Stops the relay. */
  async stop(): Promise<void> {
    if (this.relay.exitCode === null && this.relay.signalCode === null) {
      const exited = new Promise((resolve) => this.relay.once('exit', resolve));
      this.relay.kill('SIGKILL');
      await exited;
    }
    fs.rmSync(this.socket, { force: true });
  }
}
