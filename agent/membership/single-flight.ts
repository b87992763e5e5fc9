/**
 * Identical calls in flight on one agent share one execution and one answer
 * (docs/api.md §4): a controller that retries a slow join does not start a second
 * one beside the first.
 */

/** Runs at most one execution per key at a time; later callers with the same key get the same promise. */
export class SingleFlight<T> {
  private readonly inflight = new Map<string, Promise<T>>();

  /** Joins the execution in flight for `key`, or starts `run` as it. */
  do(key: string, run: () => Promise<T>): Promise<T> {
    const current = this.inflight.get(key);
    if (current !== undefined) return current;
    // Started on the next microtask, so the entry exists before `run` can settle (even by throwing).
    const started: Promise<T> = Promise.resolve()
      .then(run)
      .finally(() => {
        if (this.inflight.get(key) === started) this.inflight.delete(key);
      });
    this.inflight.set(key, started);
    return started;
  }

  /** Executions in flight now. */
  get size(): number {
    return this.inflight.size;
  }

  /** Settles once every execution in flight now has settled, however it ended. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.inflight.values()]);
  }
}

/** A key that is equal for equal requests whatever their fields' order: `action` + canonical JSON. */
export function requestKey(action: string, request: unknown): string {
  return `${action} ${canonicalJson(request)}`;
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
