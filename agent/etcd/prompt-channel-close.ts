/**
 * etcd3's channel resets, without a timer that holds the process.
 *
 * After a failed call (a member down, frozen or not started yet) etcd3 drops a host's gRPC clients;
 * one whose channel is still connecting it keeps for up to 1 s more (`waitForReady`, its workaround
 * for grpc/grpc-node#1487), and so does `close()`. That keeps the connection attempt, which gRPC
 * shares with the client that replaces it, and that matters: closing it at once makes the next
 * Status to a frozen member start over and wait its whole timeout, and health answers beside a
 * frozen member slow down by as much (health-paused.test.ts). But gRPC's 1 s watch is a ref'd timer
 * per reset, which would keep a stopped agent's process (and a test runner's workers) open.
 *
 * Invariant: a dropped client whose channel is connecting is closed 1 s later on a timer that holds
 * nothing open, any other at once; a closed host closes every client at once, those it dropped and
 * still keeps too (calls still queued on them would otherwise hold their deadline timers past the
 * close).
 */
import { connectivityState } from '@grpc/grpc-js';
import { Host } from 'etcd3/lib/connection-pool';

/** How long a dropped connecting channel is kept for the client that replaces it (etcd3's own figure). */
const CONNECTING_KEPT_MS = 1000;

/** A gRPC client of etcd3's, as far as this uses it. */
interface ServiceClient {
  close(): void;
  getChannel(): { getConnectivityState(connect: boolean): number };
}

/** The parts of etcd3's Host this replaces and reads (etcd3 1.1: private there). */
interface HostInternals {
  cachedServices: Record<string, ServiceClient | undefined>;
  closed: boolean;
}

/** Per host, the dropped clients still kept (connecting), closed with the host at the latest. */
const keptOf = new WeakMap<Host, Set<ServiceClient>>();

/** Replaces etcd3's Host.resetAllServices and Host.close as the invariant says. Idempotent. */
export function closeChannelsPromptly(): void {
  Host.prototype.resetAllServices = function resetAllServices(this: Host): void {
    const host = this as unknown as HostInternals;
    for (const service of Object.values(host.cachedServices)) {
      if (service === undefined) continue;
      if (service.getChannel().getConnectivityState(false) === connectivityState.CONNECTING) {
        const kept = keptOf.get(this) ?? new Set<ServiceClient>();
        keptOf.set(this, kept);
        kept.add(service);
        setTimeout(() => {
          kept.delete(service);
          service.close();
        }, CONNECTING_KEPT_MS).unref();
      } else {
        service.close();
      }
    }
    host.cachedServices = Object.create(null) as HostInternals['cachedServices'];
  };
  Host.prototype.close = function close(this: Host): void {
    const host = this as unknown as HostInternals;
    for (const service of [...Object.values(host.cachedServices), ...(keptOf.get(this) ?? [])]) service?.close();
    keptOf.delete(this);
    host.cachedServices = Object.create(null) as HostInternals['cachedServices'];
    host.closed = true;
  };
}
