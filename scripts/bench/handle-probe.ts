/**
 * Preloaded (`node -r`) into an agent under test when the bench needs to look
 * inside it (the soak run, memory and CPU profiles of missed targets); the
 * agent's own code is not touched. On SIGUSR2 it reads a command from
 * $BENCH_HANDLE_PROBE_FILE.cmd and answers in $BENCH_HANDLE_PROBE_FILE:
 *   snapshot       garbage-collect (with --expose-gc), then write live handles and memory;
 *   profile-start  start the V8 CPU profiler (inspector session, this process only);
 *   profile-stop   stop it and write the profile next to the answer (.cpuprofile).
 * Profiling only the measured calls keeps start-up out of the profile, which
 * --cpu-prof cannot do.
 */
import fs from 'node:fs';
import inspector from 'node:inspector';
import v8 from 'node:v8';

const file = process.env.BENCH_HANDLE_PROBE_FILE;

/** What `snapshot` writes. */
export interface HandleSnapshot {
  /** process.getActiveResourcesInfo(), counted by kind (TCPSocketWrap, Timeout, …); unref'd handles are not listed. */
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

/** Writes `text` whole, then renames: the bench never reads half an answer. */
function answer(path: string, text: string): void {
  fs.writeFileSync(`${path}.tmp`, text);
  fs.renameSync(`${path}.tmp`, path);
}

function snapshot(out: string): void {
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
  const result: HandleSnapshot = { resources, heapUsedBytes: memory.heapUsed, rssBytes: memory.rss, rssBeforeGcBytes, memory, heapSpaces };
  answer(out, JSON.stringify(result));
}

if (file !== undefined) {
  let session: inspector.Session | undefined;
  process.on('SIGUSR2', () => {
    let command = 'snapshot';
    try {
      command = fs.readFileSync(`${file}.cmd`, 'utf8').trim();
    } catch {
      // no command file: a snapshot
    }
    if (command === 'snapshot') return snapshot(file);
    if (command === 'profile-start') {
      session = new inspector.Session();
      session.connect();
      session.post('Profiler.enable', () =>
        session?.post('Profiler.start', (err) => answer(file, JSON.stringify({ started: err === null, error: err?.message }))),
      );
      return;
    }
    if (command === 'profile-stop' && session !== undefined) {
      const s = session;
      s.post('Profiler.stop', (err, result) => {
        if (err === null) fs.writeFileSync(`${file}.cpuprofile`, JSON.stringify(result.profile));
        s.disconnect();
        answer(file, JSON.stringify({ stopped: err === null, error: err?.message }));
      });
    }
  });
}
