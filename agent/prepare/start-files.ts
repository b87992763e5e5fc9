/**
 * The files a decided start writes: the bootstrap marker, the one-shot flags of the start script,
 * and etcd's start flags, with the version gate of the data directory etcd starts on.
 *
 * Invariant (crash safety): the bootstrap marker is written before the flags that start `new`, and
 * the flags file is written last and atomically: a crash before it leaves the previous flags file
 * whole, and the next prepare decides again from what etcd and the disk say. Once etcd has written
 * its WAL the marker is removed: without it, a later loss of the member directory alone cannot pass
 * for "decided, never started".
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { crashPoint } from '../lib/crash-point';
import type { Logger } from '../observability/logger';
import { BOOTSTRAP_MARKER, DataVersions, readDataVersions, writeFileAtomic } from '../etcd-data/data-dir';
import { scanWal } from '../etcd-data/wal-scan';
import { EtcdStartControl, flagLine } from './etcd-control';
import { BootstrapPlan, PrepareStep, samePlan } from './decide';
import type { PrepareOptions } from './options';
import { formatMinor, gateLines, VersionGate, versionGate } from './version-gate';

/** A decided start: etcd's start flags and why. */
export type StartStep = Extract<PrepareStep, { kind: 'start' }>;

/** Where the bootstrap marker of a data directory lives: inside it (see BOOTSTRAP_MARKER). */
export function markerPath(dataDir: string): string {
  return path.join(dataDir, BOOTSTRAP_MARKER);
}

/**
 * The start flags, one `set -- "$@" '<flag>'` line each, after the version gate's lines when the data
 * directory records versions (version-gate.ts `gateLines`): kube-inject's start script reads them as
 * data (start-script.ts `etcdStartScript`), and a shell that sources the file gets the same
 * arguments (the last flag wins in etcd) and reads the gate as comments.
 */
export function flagsFileContent(step: StartStep, token: string, name: string, at: Date, gate?: VersionGate): string {
  const flags = [`--initial-cluster=${step.initialCluster}`, `--initial-cluster-state=${step.state}`, `--initial-cluster-token=${token}`];
  return [
    `# written by etcd-lifecycle-agent prepare for ${name} at ${at.toISOString()}`,
    `# ${step.reason.replace(/\n/g, ' ')}`,
    ...(gate === undefined ? [] : gateLines(gate)),
    ...flags.map(flagLine),
    '',
  ].join('\n');
}

/**
 * The version gate of the data directory etcd starts on (its recorded versions, and the requests of
 * etcd 3.5 its log holds after the last snapshot), or undefined when it records no version. A part
 * that cannot be read is logged and left out: the start is never blocked by our own reader.
 */
function dataGate(dataDir: string, logger: Logger): { gate: VersionGate | undefined; recorded: DataVersions & { v2Entries?: number } } {
  const attempt = <T>(what: string, read: () => T): T | undefined => {
    try {
      return read();
    } catch (err) {
      logger.warn(`cannot read ${what}; the etcd container's version check goes without it`, {
        dataDir,
        error: err instanceof Error ? err.message : String(err),
      });
      return undefined;
    }
  };
  const versions = attempt('the versions the data directory records', () => readDataVersions(dataDir)) ?? {};
  const v2Entries = attempt('the write-ahead log', () => scanWal(dataDir))?.v2Entries ?? 0;
  return { gate: versionGate(versions, v2Entries), recorded: { ...versions, ...(v2Entries > 0 ? { v2Entries } : {}) } };
}

/** The bootstrap plan a marker in `dataDir` records, if one is there and readable. */
export function readMarker(dataDir: string): BootstrapPlan | undefined {
  try {
    const parsed = JSON.parse(fs.readFileSync(markerPath(dataDir), 'utf8')) as Partial<BootstrapPlan>;
    return typeof parsed.initialCluster === 'string' && typeof parsed.token === 'string'
      ? { initialCluster: parsed.initialCluster, token: parsed.token }
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Writes the files of the decided start `step` and logs it: the marker first when it starts `new`,
 * the flags file last. The sidecar (`run.sidecar`) mounts the data read-only and never bootstraps:
 * it leaves a marker to the next init container. A one-shot start needs the start script's control
 * files (`run.control`).
 */
export function writeStart(
  opts: PrepareOptions,
  step: StartStep,
  plan: BootstrapPlan,
  run: { sidecar?: boolean; control?: EtcdStartControl },
  logger: Logger,
): void {
  if (step.state === 'new' && !samePlan(readMarker(opts.dataDir) ?? { initialCluster: '', token: '' }, plan)) {
    writeFileAtomic(markerPath(opts.dataDir), `${JSON.stringify(plan)}\n`);
  }
  // Once etcd has written its WAL the marker has done its work: without it, a later loss of the
  // member directory alone cannot pass for "decided, never started". (The sidecar mounts the data
  // read-only and never bootstraps: it leaves a marker to the next init container.)
  if (step.state === 'existing' && run.sidecar !== true) fs.rmSync(markerPath(opts.dataDir), { force: true });
  if (step.once !== undefined) {
    if (run.control === undefined) throw new Error(`a one-shot start (${step.once.join(' ')}) needs the start script's control files`);
    run.control.writeOnce(step.once, step.reason);
  } else {
    run.control?.dropOnce();
  }
  // Only a directory etcd has written records versions; a new or joining member's is empty.
  const { gate, recorded } = step.state === 'existing' ? dataGate(opts.dataDir, logger) : { gate: undefined, recorded: {} };
  writeFileAtomic(opts.flagsFile, flagsFileContent(step, opts.token, opts.self.name, new Date(), gate));
  crashPoint('prepare-flags-written');
  logger.info('prepared', {
    member: opts.self.name,
    state: step.state,
    initialCluster: step.initialCluster,
    reason: step.reason,
    flagsFile: opts.flagsFile,
    dataVersions: recorded,
    ...(gate === undefined ? {} : { etcdVersions: `${formatMinor(gate.oldest)} to ${formatMinor(gate.newest)}` }),
    ...(step.once === undefined ? {} : { once: step.once }),
  });
}
