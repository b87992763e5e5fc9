/**
 * Which etcd the local clusters, the quick start, the bench and the tests run: one setting,
 * `ETCD_VERSION` (3.4, 3.5, 3.6 or 3.7; default 3.6, what KubeBlocks and kubeadm ship), resolved to
 * the folder `scripts/etcd.sh` prints (Debian's 3.4, or a build of the Go module proxy's, made there
 * when missing), and the flags that version takes. `ETCD_BIN` (a path to an etcd binary) overrides
 * the folder; its version is then read from `etcd --version`.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** The etcd minor versions the harness knows how to get and start. */
export const ETCD_MINORS = ['3.4', '3.5', '3.6', '3.7'] as const;
export type EtcdMinor = (typeof ETCD_MINORS)[number];
/** The version everything runs on unless `ETCD_VERSION` says otherwise. */
export const DEFAULT_ETCD_MINOR: EtcdMinor = '3.6';

/** One etcd install: its binaries and the version `etcd --version` reports. */
export interface EtcdInstall {
  /** The minor version, e.g. `3.6`. */
  minor: EtcdMinor;
  /** The full version, e.g. `3.6.16`. */
  version: string;
  etcd: string;
  etcdctl: string;
  /** Absent for 3.4, which has none. */
  etcdutl?: string;
}

/** The minor version `ETCD_VERSION` names (default 3.6); a clear error for anything else. */
export function etcdMinor(env: NodeJS.ProcessEnv = process.env): EtcdMinor {
  const asked = (env.ETCD_VERSION ?? '').trim();
  if (asked === '') return DEFAULT_ETCD_MINOR;
  const minor = ETCD_MINORS.find((m) => asked === m || asked.startsWith(`${m}.`));
  if (minor === undefined) throw new Error(`ETCD_VERSION=${asked}: not one of ${ETCD_MINORS.join(', ')}`);
  return minor;
}

/** The minor version of a full one (`3.6.16` → `3.6`), or undefined when the harness does not know it. */
export function minorOf(version: string): EtcdMinor | undefined {
  return ETCD_MINORS.find((m) => version === m || version.startsWith(`${m}.`));
}

const installs = new Map<string, EtcdInstall>();

/**
 * The etcd to run: `ETCD_BIN` when set, else the folder of `ETCD_VERSION`'s install
 * (`ETCD_DIR_3_6` and the like when the test command resolved it already, else `scripts/etcd.sh`,
 * which builds it when missing). Resolved once per process.
 */
export function etcdInstall(env: NodeJS.ProcessEnv = process.env): EtcdInstall {
  const key = `${env.ETCD_BIN ?? ''}|${env.ETCD_VERSION ?? ''}`;
  let install = installs.get(key);
  if (install === undefined) {
    install = env.ETCD_BIN ? fromBinary(env.ETCD_BIN) : fromFolder(etcdFolder(etcdMinor(env), env));
    installs.set(key, install);
  }
  return install;
}

/**
 * The install of one minor version, whatever `ETCD_VERSION` and `ETCD_BIN` say: for a test that runs
 * several versions side by side (a rolling upgrade). Resolved once per process.
 */
export function etcdInstallOf(minor: EtcdMinor, env: NodeJS.ProcessEnv = process.env): EtcdInstall {
  const key = `minor|${minor}`;
  let install = installs.get(key);
  if (install === undefined) {
    install = fromFolder(etcdFolder(minor, env));
    installs.set(key, install);
  }
  return install;
}

/** The folder holding `minor`'s binaries: `ETCD_DIR_<minor>` when set, else what `scripts/etcd.sh` prints. */
export function etcdFolder(minor: EtcdMinor, env: NodeJS.ProcessEnv = process.env): string {
  const preset = env[`ETCD_DIR_${minor.replace('.', '_')}`];
  if (preset) return preset;
  // This file runs from scripts/ (ts-jest) and from dist/scripts/ (the build).
  const script = [path.join(__dirname, 'etcd.sh'), path.join(__dirname, '..', '..', 'scripts', 'etcd.sh')].find((f) => fs.existsSync(f));
  if (script === undefined) throw new Error(`scripts/etcd.sh not found from ${__dirname}`);
  try {
    return execFileSync('bash', [script, minor], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  } catch (err) {
    throw new Error(`etcd ${minor} is not available (bash scripts/etcd.sh ${minor} failed): ${(err as Error).message.split('\n')[0]}`);
  }
}

function fromFolder(dir: string): EtcdInstall {
  const install = fromBinary(path.join(dir, 'etcd'));
  return { ...install, etcdctl: path.join(dir, 'etcdctl') };
}

function fromBinary(etcd: string): EtcdInstall {
  if (!isExecutable(etcd)) throw new Error(`etcd not found at ${etcd}`);
  const out = execFileSync(etcd, ['--version'], { encoding: 'utf8', env: { PATH: process.env.PATH } });
  const version = /etcd Version:\s*([0-9][0-9.]*)/.exec(out)?.[1];
  const minor = version === undefined ? undefined : minorOf(version);
  if (version === undefined || minor === undefined)
    throw new Error(`${etcd} --version says ${JSON.stringify(out.split('\n')[0])}: not an etcd 3.4–3.7`);
  const dir = path.dirname(etcd);
  const beside = (name: string): string | undefined => (isExecutable(path.join(dir, name)) ? path.join(dir, name) : undefined);
  const etcdctl = beside('etcdctl') ?? '/usr/bin/etcdctl';
  const etcdutl = beside('etcdutl');
  return { minor, version, etcd, etcdctl, ...(etcdutl === undefined ? {} : { etcdutl }) };
}

/**
 * The flags every local member of `minor` starts with besides its URLs and cluster: fast elections
 * (loopback latency is far below 50 ms) and JSON logs on stderr. Each of these is accepted from 3.4
 * to 3.7; a flag one version lacks belongs in {@link featureFlags}.
 */
export function baseFlags(minor: EtcdMinor): string[] {
  void minor;
  return ['--heartbeat-interval=50', '--election-timeout=500', '--logger=zap', '--log-outputs=stderr'];
}

/** A server behaviour a test may ask for, spelled differently by each version. */
export type EtcdFeature = 'stop-grpc-service-on-defrag';

/**
 * The flags that turn `feature` on for `minor`: 3.5 has `--experimental-*` flags, 3.6 has both
 * them and feature gates, 3.7 only the gates (an unknown flag stops etcd). Empty where the version
 * does not have the feature at all.
 */
export function featureFlags(minor: EtcdMinor, feature: EtcdFeature): string[] {
  switch (feature) {
    case 'stop-grpc-service-on-defrag':
      if (minor === '3.4') return [];
      if (minor === '3.5') return ['--experimental-stop-grpc-service-on-defrag=true'];
      return ['--feature-gates=StopGRPCServiceOnDefrag=true'];
  }
}

/** True when `file` is a regular file this process may run. */
export function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}
