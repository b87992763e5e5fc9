/**
 * etcd3's channel resets, made prompt.
 *
 * After a failed call (a member down, frozen or not started yet) and on `close()`, etcd3 drops a
 * host's gRPC clients; one whose channel is still connecting it does not close but watches for up
 * to 1 s more (`waitForReady`, its workaround for grpc-node issue 1487: closing a connecting channel
 * used to fail the calls still pending on it as UNAVAILABLE, which is also how they fail now, and
 * what the agent retries). Each such reset held a timer and a connection attempt for that second,
 * past the agent's stop too, so a stopped agent kept its process (and jest's workers) open.
 *
 * Invariant: once installed, a gRPC client etcd3 drops is closed at once, whatever its channel's state.
 */
import { Host } from 'etcd3/lib/connection-pool';

/** The part of etcd3's Host this replaces and reads (etcd3 1.1: `cachedServices` is private there). */
interface HostInternals {
  cachedServices: Record<string, { close(): void } | undefined>;
}

/** Replaces etcd3's Host.resetAllServices with one that closes every client now. Idempotent. */
export function closeChannelsPromptly(): void {
  Host.prototype.resetAllServices = function resetAllServicesNow(this: Host): void {
    const host = this as unknown as HostInternals;
    for (const service of Object.values(host.cachedServices)) service?.close();
    host.cachedServices = Object.create(null) as HostInternals['cachedServices'];
  };
}
