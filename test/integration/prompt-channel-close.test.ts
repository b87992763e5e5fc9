/**
 * prompt-channel-close.ts against real gRPC channels that cannot finish connecting: a TCP listener
 * that accepts and never answers, as a frozen member's does. With etcd3's own reset, a failed call
 * leaves gRPC watching the dropped channel for 1 s, a timer that holds the process; with the
 * agent's, nothing holds it, and the dropped channel is still closed. Each case waits for the event
 * it is about (a timer gone, a channel's state), never for a time.
 */
import asyncHooks from 'node:async_hooks';
import net from 'node:net';
import { connectivityState } from '@grpc/grpc-js';
import { Host } from 'etcd3/lib/connection-pool';
import { etcd3 } from '../../agent/etcd/etcd3-module';
import { eventually } from '../helpers/eventually';

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

  /** A client whose one call to the silent listener failed, and the gRPC client etcd3 dropped for it. */
  async function afterFailedCall(): Promise<{
    client: { close(): void };
    dropped: { getChannel(): { getConnectivityState(c: boolean): number } };
  }> {
    const client = new (etcd3().Etcd3)({ hosts: [url] });
    const host = (client as unknown as { pool: { hosts: Array<{ cachedServices: Record<string, unknown> }> } }).pool.hosts[0];
    const call = client
      .get('k')
      .options({ deadline: new Date(Date.now() + 300) })
      .string();
    await new Promise((resolve) => setImmediate(resolve));
    const dropped = Object.values(host.cachedServices)[0] as { getChannel(): { getConnectivityState(c: boolean): number } };
    await expect(call).rejects.toThrow();
    return { client, dropped };
  }

  /** Waits until no watch timer etcd3 left holds the process, so that the next case starts from a quiet one. */
  const quiet = (): Promise<unknown> => eventually(() => heldWatchTimers() === 0, { within: 10_000, every: 50 });

  it('when etcd3 resets on its own, then a failed call leaves gRPC watching the channel, holding the process (what the agent replaces)', async () => {
    expect(prompt).not.toBe(own);
    Host.prototype.resetAllServices = own;
    const { client } = await afterFailedCall();

    expect(heldWatchTimers()).toBeGreaterThan(0);
    client.close();
    await quiet();
  });

  it('when the agent loaded etcd3, then a failed call holds nothing open, and the dropped channel is closed', async () => {
    Host.prototype.resetAllServices = prompt;
    const { client, dropped } = await afterFailedCall();

    expect(heldWatchTimers()).toBe(0);
    // Closed by the agent's reset itself, with no timer of its own holding the process meanwhile.
    await eventually(() => expect(dropped.getChannel().getConnectivityState(false)).toBe(connectivityState.SHUTDOWN), {
      within: 10_000,
      every: 20,
    });
    expect(heldWatchTimers()).toBe(0);
    client.close();
  });

  it('when the agent closes a client whose channel is connecting, then it is closed at once and nothing is left', async () => {
    const client = new (etcd3().Etcd3)({ hosts: [url] });
    const host = (client as unknown as { pool: { hosts: Array<{ cachedServices: Record<string, unknown> }> } }).pool.hosts[0];
    const call = client
      .get('k')
      .options({ deadline: new Date(Date.now() + 5000) })
      .string();
    const service = await eventually(
      () => {
        const found = Object.values(host.cachedServices)[0] as { getChannel(): { getConnectivityState(c: boolean): number } } | undefined;
        expect(found?.getChannel().getConnectivityState(false)).toBe(connectivityState.CONNECTING);
        return found as { getChannel(): { getConnectivityState(c: boolean): number } };
      },
      { within: 10_000, every: 10 },
    );

    client.close();

    expect(service.getChannel().getConnectivityState(false)).toBe(connectivityState.SHUTDOWN);
    await expect(call).rejects.toThrow();
    expect(heldWatchTimers()).toBe(0);
  });
});
