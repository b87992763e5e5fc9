/**
 * A story's writer: one key after another through the etcd client Service (its ClusterIP, which
 * routes to Ready members only, as a client in the cluster would), each put on a connection of its
 * own deadline. It records every write it sent and whether etcd acknowledged it; at the end every
 * acknowledged key is read back through a quorum, and a missing or changed one is a lost write.
 * A put that failed may or may not have been applied: only acknowledged ones are owed.
 */
import type { Etcd3 } from 'etcd3';
import { noop } from 'cockatiel';
import { etcd3 } from '../../../agent/etcd/etcd3-module';

/** One write as the writer saw it: sent at `sentAt`, answered (or failed) at `at`. */
export interface WriteRecord {
  key: string;
  value: string;
  sentAt: number;
  at: number;
  acknowledged: boolean;
  error?: string;
}

/** The pause between two writes: about 20 a second, enough to be in every moment of a story. */
const PACE_MS = 50;
/** How long one put may take before it counts as failed (a dead connection answers nothing). */
const PUT_DEADLINE_MS = 3000;

/** A client of `hosts` that fails fast and retries nothing: the writer decides what a failure means. */
export function plainClient(hosts: string[]): Etcd3 {
  return new (etcd3().Etcd3)({
    hosts,
    dialTimeout: PUT_DEADLINE_MS,
    faultHandling: { global: noop, host: () => noop },
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + PUT_DEADLINE_MS }),
  });
}

/** Writes `<prefix><n>` = `<n>` through `endpoint()` until stopped. */
export class Writer {
  readonly writes: WriteRecord[] = [];
  private stopping = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;

  /** `endpoint()` answers the client URL to write through (asked again after each failure). */
  constructor(
    private readonly endpoint: () => Promise<string>,
    readonly prefix: string,
  ) {}

  start(): void {
    this.loop ??= this.run();
  }

  private async run(): Promise<void> {
    let client: Etcd3 | undefined;
    for (let n = 0; !this.stopping; n++) {
      const key = `${this.prefix}${String(n).padStart(6, '0')}`;
      const value = String(n);
      const sentAt = Date.now();
      try {
        client ??= plainClient([await this.endpoint()]);
        await client.put(key).value(value);
        this.writes.push({ key, value, sentAt, at: Date.now(), acknowledged: true });
      } catch (err) {
        this.writes.push({ key, value, sentAt, at: Date.now(), acknowledged: false, error: String(err) });
        // A new connection next time: the Service may route it to another member.
        client?.close();
        client = undefined;
      }
      if (!this.stopping) await new Promise<void>((resolve) => ((this.wake = resolve), setTimeout(resolve, PACE_MS)));
    }
    client?.close();
  }

  /** Ends the writing; resolves once the last put has its answer. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake?.();
    await this.loop;
  }

  /** The acknowledged writes. */
  acknowledged(): WriteRecord[] {
    return this.writes.filter((w) => w.acknowledged);
  }

  /**
   * The acknowledged writes whose key is missing or holds another value now, read through a quorum
   * of the cluster at `endpoint` (a linearizable range of the whole prefix).
   */
  async lost(endpoint: string): Promise<WriteRecord[]> {
    const client = plainClient([endpoint]);
    try {
      const stored = await client.getAll().prefix(this.prefix).strings();
      return this.acknowledged().filter((w) => stored[w.key] !== w.value);
    } finally {
      client.close();
    }
  }

  /** A line for a failure message or the story's log. */
  summary(): string {
    const failed = this.writes.filter((w) => !w.acknowledged);
    const errors = [...new Set(failed.map((w) => w.error))].slice(0, 3).join('; ');
    return `${this.writes.length} writes sent, ${this.acknowledged().length} acknowledged, ${failed.length} failed${errors ? ` (${errors})` : ''}`;
  }
}
