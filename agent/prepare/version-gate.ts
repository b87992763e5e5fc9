/**
 * Which etcd minor versions may start on a data directory, from the versions etcd recorded in it,
 * and the refusal the etcd container's start script gives any other (docs/operations/upgrading-etcd.md).
 * Pure: the versions go in, the rule and the flags-file lines that carry it to the start script come out.
 *
 * What etcd does itself (test/integration/etcd-upgrade.test.ts checks it with 3.5.35, 3.6.16 and 3.7.3):
 * - an older etcd on newer data exits 1 after its first log lines, in a crash loop whose reason
 *   sits in a fatal JSON line with a stack trace: 3.5 on 3.6 or 3.7 data "invalid downgrade; server
 *   version is lower than determined cluster version", 3.6 on 3.7 data `version "3.7.0" is not
 *   supported`;
 * - an etcd that skips a minor version (3.7 on 3.5 data) panics replaying the write-ahead log
 *   ("unmarshal should never fail"), exit 2;
 * - so does 3.7 on 3.6 data whose write-ahead log still holds, after its last snapshot, requests
 *   etcd 3.5 wrote (wal-scan.ts): 3.5 → 3.6 → 3.7 fails unless each 3.6 member took a snapshot after
 *   the last 3.5 member stopped.
 *
 * The rule: etcd keeps the storage version (3.6+, bbolt `meta/storageVersion`) and the cluster
 * version (3.4+, `cluster/clusterVersion`) in its backend; both follow the cluster version, which
 * moves up only once every member runs the new minor, and down only through etcd's downgrade
 * procedure. So a directory may run the minor of the higher of the two (never older: etcd refuses
 * it) up to one minor above the data's own version (the storage version, else the cluster version:
 * etcd upgrades one minor at a time), and no further than 3.6 while the log holds 3.5's requests.
 * A member upgraded while its cluster still runs the old minor can therefore go back: its data
 * still says the old one. Without any recorded version there is no rule (the start script checks
 * nothing).
 *
 * Invariant: the start script only compares the ranks of {@link gateLines} and prints the messages
 * rendered here, so {@link gateRefusal} is what it does (test/unit/etcd-start-script.test.ts, and the
 * integration test runs it with etcd's real binaries).
 */
import type { DataVersions } from '../etcd-data/data-dir';

export type { DataVersions };

/** A major.minor version. */
export interface Minor {
  major: number;
  minor: number;
}

/** The etcd versions that may start on a data directory. */
export interface VersionGate {
  /** The oldest minor that may run it. */
  oldest: Minor;
  /** The newest minor that may run it. */
  newest: Minor;
  /** The minor the data was written by (the higher recorded version), as the refusal names it. */
  writtenBy: Minor;
  /** Entries etcd 3.5 or older wrote that the log holds after its last snapshot; they cap `newest` at 3.6. */
  v2Entries: number;
  /** Whether those entries, not the one-minor rule, set `newest`. */
  cappedByLog: boolean;
  /** What the directory records, for logs. */
  recorded: string;
}

/** `3.6.16` → {3, 6}; undefined for anything that does not begin with two numbers. */
export function minorOf(version: string): Minor | undefined {
  const m = /^v?(\d{1,4})\.(\d{1,4})(?:\.|$)/.exec(version.trim());
  return m === null ? undefined : { major: Number(m[1]), minor: Number(m[2]) };
}

/** `{3, 6}` → `3.6`. */
export function formatMinor(v: Minor): string {
  return `${v.major}.${v.minor}`;
}

/** The cluster version etcd records at bootstrap, before it has decided one. */
const BOOTSTRAP_PLACEHOLDER: Minor = { major: 3, minor: 0 };

/** The last minor that replays etcd 3.5's v2 requests. */
const LAST_V2_READER: Minor = { major: 3, minor: 6 };

/**
 * The gate of a data directory that records `versions`, whose log holds `v2Entries` of etcd 3.5's
 * requests after its last snapshot; undefined when it records no version.
 */
export function versionGate(versions: DataVersions, v2Entries = 0): VersionGate | undefined {
  const storage = versions.storage === undefined ? undefined : minorOf(versions.storage);
  const recordedCluster = versions.cluster === undefined ? undefined : minorOf(versions.cluster);
  // 3.0 is etcd's placeholder (its MinClusterVersion), written at bootstrap until the leader decides
  // the cluster version from the members' own, seconds later: it says nothing of the data, and read
  // as a version it would make a pod restarted in those seconds refuse its own etcd.
  const cluster = recordedCluster !== undefined && rank(recordedCluster) === rank(BOOTSTRAP_PLACEHOLDER) ? undefined : recordedCluster;
  const own = storage ?? cluster;
  if (own === undefined) return undefined;
  const oldest = cluster === undefined || rank(own) >= rank(cluster) ? own : cluster;
  const recorded = [
    ...(versions.storage === undefined ? [] : [`storage version ${versions.storage}`]),
    ...(cluster === undefined || versions.cluster === undefined ? [] : [`cluster version ${versions.cluster}`]),
  ].join(', ');
  const oneMinorOn = { major: own.major, minor: own.minor + 1 };
  const cappedByLog = v2Entries > 0 && rank(LAST_V2_READER) < rank(oneMinorOn);
  const newest = cappedByLog ? LAST_V2_READER : oneMinorOn;
  const log = v2Entries > 0 ? [`${v2Entries} requests of etcd 3.5 or older in the write-ahead log after its last snapshot`] : [];
  return { oldest, newest, writtenBy: oldest, v2Entries, cappedByLog, recorded: [recorded, ...log].filter((r) => r !== '').join(', ') };
}

/** The one line that refuses `etcdVersion` (as `etcd --version` prints it) on the gated data; undefined when it may start. */
export function gateRefusal(gate: VersionGate, etcdVersion: string): string | undefined {
  const running = minorOf(etcdVersion);
  if (running === undefined) return undefined;
  if (rank(running) < rank(gate.oldest)) return tooOld(etcdVersion, gate);
  if (rank(running) > rank(gate.newest)) return tooNew(etcdVersion, gate);
  return undefined;
}

/** The prefix of the flags file's gate lines (comments to a shell that sources the file). */
export const GATE_PREFIX = '#etcd-version-';

/**
 * The gate as data lines of the flags file, which kube-inject's start script reads (never runs):
 * `#etcd-version-gate <oldest rank> <newest rank>` (rank: major × 10000 + minor) and the two
 * refusals, `#etcd-version-too-old <line>` and `#etcd-version-too-new <line>`, in which the script
 * puts the version `<etcd binary> --version` prints in place of `{version}`. A shell that sources the file
 * reads them as comments. The script prints the refusal on stderr, writes it to `etcd-start-note`
 * beside the flags file (for the sidecar's health) and to the termination log, and exits 1
 * (start-script.ts `etcdStartScript`).
 */
export function gateLines(gate: VersionGate): string[] {
  return [
    `# The data directory records ${gate.recorded}: it may run etcd ${formatMinor(gate.oldest)} to ${formatMinor(gate.newest)} (etcd-lifecycle-agent prepare).`,
    `${GATE_PREFIX}gate ${rank(gate.oldest)} ${rank(gate.newest)}`,
    `${GATE_PREFIX}too-old ${tooOld('{version}', gate)}`,
    `${GATE_PREFIX}too-new ${tooNew('{version}', gate)}`,
  ];
}

function tooOld(version: string, gate: VersionGate): string {
  return `etcd ${version} cannot run data written by ${formatMinor(gate.writtenBy)}; upgrade the image or restore`;
}

function tooNew(version: string, gate: VersionGate): string {
  if (gate.cappedByLog) {
    return (
      `etcd ${version} cannot replay the ${gate.v2Entries} requests etcd 3.5 left in this member's write-ahead log: ` +
      `run etcd ${formatMinor(LAST_V2_READER)} until it takes a snapshot (restart it once with --snapshot-count=1), then upgrade`
    );
  }
  return `etcd ${version} cannot run data written by ${formatMinor(gate.writtenBy)}: upgrade one minor version at a time (${formatMinor(gate.newest)} first)`;
}

function rank(v: Minor): number {
  return v.major * 10000 + v.minor;
}
