/**
 * Old etcd clients kept open after new credentials replaced them, so calls in
 * flight on them finish. etcd3 takes TLS credentials at construction, so a
 * rotation builds new clients; the old ones are retired here.
 *
 * Invariant: a retired client is closed once its grace has passed and nobody
 * pins it (a held membership lock pins the client its lease lives on: closing
 * it would lose the lease and with it the lock), and at the latest after
 * `maxHoldMs` whatever pins it, so no client is kept for ever. A pin taken on
 * a client that is still current simply carries over to its retirement.
 */
import type { Etcd3 } from 'etcd3';
import { RETIRED_CLIENT_MAX_HOLD_MS } from '../config/timings';

/** Releases a pin; calling it twice releases once. */
export type Unpin = () => void;

/** How long retired clients stay open. */
export interface RetirementOptions {
  /** How long a retired client stays open for the calls already sent on it (longer than one attempt). */
  graceMs: number;
  /** The longest a pinned retired client stays open (longer than the longest call deadline, 60 s). */
  maxHoldMs?: number;
}

interface Retired {
  graceOver: boolean;
  timers: NodeJS.Timeout[];
}

/** Pins on clients, and the retired clients waiting to be closed. */
export class RetiringClients {
  private readonly pins = new Map<Etcd3, number>();
  private readonly retired = new Map<Etcd3, Retired>();

  constructor(private readonly options: RetirementOptions) {}

  /** Keeps `client` open, even once retired, until the returned function is called. */
  pin(client: Etcd3): Unpin {
    this.pins.set(client, (this.pins.get(client) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = (this.pins.get(client) ?? 1) - 1;
      if (left > 0) this.pins.set(client, left);
      else this.pins.delete(client);
      this.closeIfDone(client);
    };
  }

  /** Closes each of `clients` once its grace has passed and it is no longer pinned (or `maxHoldMs` passed). */
  retire(clients: Iterable<Etcd3>): void {
    for (const client of clients) {
      if (this.retired.has(client)) continue;
      const entry: Retired = { graceOver: false, timers: [] };
      this.retired.set(client, entry);
      const grace = setTimeout(() => {
        entry.graceOver = true;
        this.closeIfDone(client);
      }, this.options.graceMs);
      const cap = setTimeout(
        () => this.close(client),
        Math.max(this.options.graceMs, this.options.maxHoldMs ?? RETIRED_CLIENT_MAX_HOLD_MS),
      );
      grace.unref();
      cap.unref();
      entry.timers.push(grace, cap);
    }
  }

  /** Retired clients not closed yet. */
  get pending(): number {
    return this.retired.size;
  }

  /** Closes every retired client now (shutdown). */
  closeAll(): void {
    for (const client of [...this.retired.keys()]) this.close(client);
    this.pins.clear();
  }

  private closeIfDone(client: Etcd3): void {
    const entry = this.retired.get(client);
    if (entry?.graceOver === true && !this.pins.has(client)) this.close(client);
  }

  private close(client: Etcd3): void {
    const entry = this.retired.get(client);
    if (entry === undefined) return;
    for (const timer of entry.timers) clearTimeout(timer);
    this.retired.delete(client);
    this.pins.delete(client);
    client.close();
  }
}
