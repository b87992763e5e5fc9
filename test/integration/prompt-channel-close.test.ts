/**
 * prompt-channel-close.ts against real gRPC channels that cannot finish connecting: a TCP listener
 * that accepts and never answers, as a frozen member's does. With etcd3's own reset, a failed call
 * leaves gRPC watching the dropped channel for 1 s, a timer that holds the process; with the
 * agent's, nothing is left.
 */
import asyncHooks from 'node:async_hooks';
import net from 'node:net';
import { Host } from 'etcd3/lib/connection-pool';
import { etcd3 } from '../../agent/etcd/etcd3-module';

/** Timers gRPC starts to watch a channel's state (waitForReady), by async id, while they live. */
const watchTimers = new Map<number, NodeJS.Timeout>();
const hook = asyncHooks.createHook({
  init: (id, type, _trigger, resource) => {
    if (type === 'Timeout' && /watchConnectivityState/.test(new Error().stack ?? '')) watchTimers.set(id, resource as NodeJS.Timeout);
  },
  destroy: (id) => watchTimers.delete(id),
});

/** Of those, the ones holding this process open now. */
const heldWatchTimers = (): number => [...watchTimers.values()].filter((t) => t.hasRef()).length;

describe('etcd3 channel resets', () => {
  const sockets: net.Socket[] = [];
  const silent = net.createServer((socket) => sockets.push(socket));
  let url: string;
  // etcd3's own reset, as it was before the agent loaded etcd3 (which installs its own).
  const own = Host.prototype.resetAllServices;
  let prompt: typeof own;

  beforeAll(async () => {
    hook.enable();
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
    etcd3();
    prompt = Host.prototype.resetAllServices;
  });

  afterAll(async () => {
    hook.disable();
    Host.prototype.resetAllServices = prompt;
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
  });

  /** Watch timers holding the process right after a call to the silent listener failed and its client closed. */
  async function heldAfterFailedCall(): Promise<number> {
    const client = new (etcd3().Etcd3)({ hosts: [url] });
    await expect(client.get('k').options({ deadline: new Date(Date.now() + 300) })).rejects.toThrow();
    client.close();
    await new Promise((resolve) => setImmediate(resolve));
    const held = heldWatchTimers();
    // What etcd3 left ends within its 1 s; the next case starts from a quiet process.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    return held;
  }

  it('when etcd3 resets on its own, then a failed call leaves gRPC watching the channel, holding the process (what the agent replaces)', async () => {
    expect(prompt).not.toBe(own);
    Host.prototype.resetAllServices = own;

    expect(await heldAfterFailedCall()).toBeGreaterThan(0);
  });

  it('when the agent loaded etcd3, then a failed call and close leave nothing watching the channel', async () => {
    Host.prototype.resetAllServices = prompt;

    expect(await heldAfterFailedCall()).toBe(0);
  });
});
