/**
 * Preloaded (`node -r`) into the agent under test in the soak run only: on
 * SIGUSR2 it collects garbage (when started with --expose-gc) and writes the
 * process's live handles and heap to $BENCH_HANDLE_PROBE_FILE. Handles
 * (sockets, timers) are only visible from inside the process; the agent's own
 * code is not touched.
 */
import fs from 'node:fs';
import v8 from 'node:v8';

const file = process.env.BENCH_HANDLE_PROBE_FILE;

/** What one SIGUSR2 writes. */
export interface HandleSnapshot {
  /** process.getActiveResourcesInfo(), counted by kind (TCPSocketWrap, Timeout, …). */
  resources: Record<string, number>;
  heapUsedBytes: number;
  rssBytes: number;
  /** Resident memory before the GC. */
  rssBeforeGcBytes: number;
  /** process.memoryUsage() after the GC. */
  memory: NodeJS.MemoryUsage;
  /** V8 heap spaces after the GC (old, new, code, large objects, …): bytes in use and bytes committed. */
  heapSpaces: Record<string, { used: number; committed: number }>;
}

if (file !== undefined) {
  process.on('SIGUSR2', () => {
    const rssBeforeGcBytes = process.memoryUsage.rss();
    const gc = (globalThis as { gc?: () => void }).gc;
    gc?.();
    gc?.();
    const resources: Record<string, number> = {};
    for (const kind of process.getActiveResourcesInfo()) resources[kind] = (resources[kind] ?? 0) + 1;
    const memory = process.memoryUsage();
    const heapSpaces = Object.fromEntries(
      v8.getHeapSpaceStatistics().map((s) => [s.space_name, { used: s.space_used_size, committed: s.physical_space_size }]),
    );
    const snapshot: HandleSnapshot = { resources, heapUsedBytes: memory.heapUsed, rssBytes: memory.rss, rssBeforeGcBytes, memory, heapSpaces };
    // Written whole, then renamed: the bench never reads half a snapshot.
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(snapshot));
    fs.renameSync(`${file}.tmp`, file);
  });
}
