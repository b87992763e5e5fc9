/**
 * `etcd-lifecycle-agent prepare` options: the agent's own configuration
 * (endpoints, member name, peer URL template, TLS, listen address for the
 * answer peers read) plus what only prepare needs. Each has an environment
 * variable and a `--flag` twin; the flag wins; a bad value is a ConfigError
 * naming the variable (exit 2), as for `serve`.
 */
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { Config, ConfigError, loadConfig } from '../config/config';
import { unusableDirectory, unwritableFile } from '../config/paths';
import { settingsOptions } from '../config/settings';
import type { CommandUsage } from '../lib/usage';
import { peerUrlFromTemplate, validatePeerUrl } from '../proto/urls';
import { TAKEOVER_HINT, unusableEntry } from './data-access';
import type { InitialMember } from './decide';
import { parseRestoreOptions, RESTORE_VARIABLES, type RestoreOptions } from './restore-options';

export type { RestoreOptions } from './restore-options';

/** Where the etcd container's command sources its start flags from, unless told otherwise. */
export const DEFAULT_FLAGS_FILE = '/var/run/etcd-lifecycle-agent/etcd-flags.sh';

/** etcd's own default `--initial-cluster-token`. */
export const DEFAULT_TOKEN = 'etcd-cluster';

/** How long prepare keeps trying by default before it exits 1: a minute, then the kubelet runs it again (and shows the pod's trouble). */
const DEFAULT_WAIT_SECONDS = 60;
/** The longest `--wait-seconds`: an hour; beyond it, exiting and being run again says more than waiting on. */
const MAX_WAIT_SECONDS = 3600;

/** The `variable` of a ConfigError about the command line itself (an unknown or malformed flag): a usage error. */
export const ARGV = 'argv';

/** Validated prepare options. */
export interface PrepareOptions {
  config: Config;
  /** This pod's member: its name and peer URL (normalised). */
  self: { name: string; peerURL: string };
  dataDir: string;
  flagsFile: string;
  /** The initial set a bootstrap would use; empty means this pod never bootstraps. */
  initial: InitialMember[];
  token: string;
  /** How long prepare keeps trying before it exits non-zero (the init container then retries). */
  waitSeconds: number;
  /** The restore asked for (ETCD_AGENT_RESTORE_FROM): done only as backup/restore-decision.ts says. */
  restore?: RestoreOptions;
}

const VARIABLES = {
  'data-dir': 'ETCD_AGENT_DATA_DIR',
  'flags-file': 'ETCD_AGENT_PREPARE_FLAGS_FILE',
  'initial-cluster': 'ETCD_AGENT_INITIAL_CLUSTER',
  'initial-cluster-token': 'ETCD_AGENT_INITIAL_CLUSTER_TOKEN',
  'peer-url': 'ETCD_AGENT_PEER_URL',
  'wait-seconds': 'ETCD_AGENT_PREPARE_WAIT_SECONDS',
  ...RESTORE_VARIABLES,
} as const;

type Key = keyof typeof VARIABLES;

/** prepare's own options as its help lists them: argument, default, meaning (the variable comes from VARIABLES). */
const OWN_OPTIONS: ReadonlyArray<{ key: Key; arg: string; default?: string; meaning: string }> = [
  {
    key: 'data-dir',
    arg: 'DIR',
    meaning: "required: etcd's data directory, a subdirectory of the volume (it is renamed aside, never the mount point)",
  },
  {
    key: 'initial-cluster',
    arg: 'NAME=URL,...',
    meaning: 'the initial set, as etcd takes it; without it prepare never bootstraps a cluster',
  },
  {
    key: 'initial-cluster-token',
    arg: 'TOKEN',
    default: DEFAULT_TOKEN,
    meaning: "etcd's --initial-cluster-token, written with the other flags",
  },
  { key: 'peer-url', arg: 'URL', default: 'from ETCD_AGENT_PEER_URL_TEMPLATE and the member name', meaning: "this pod's peer URL" },
  {
    key: 'flags-file',
    arg: 'FILE',
    default: DEFAULT_FLAGS_FILE,
    meaning: "the file etcd's command sources (written atomically, last); its directory is made when missing",
  },
  {
    key: 'wait-seconds',
    arg: 'N',
    default: String(DEFAULT_WAIT_SECONDS),
    meaning: `how long to keep trying before exiting 1, 1-${MAX_WAIT_SECONDS} (the kubelet then runs it again)`,
  },
  {
    key: 'restore-from',
    arg: 'STORE',
    meaning:
      'restore the cluster from a backup in this store (`s3://bucket/prefix?…`, `file:///dir`, `/dir`) when the data of every initial member is gone: the initial member whose name sorts first restores, the others join it; never while a cluster answers or any member has data',
  },
  {
    key: 'restore-backup',
    arg: 'NAME',
    default: 'the newest verified backup',
    meaning: 'the backup to restore, by name (with ETCD_AGENT_RESTORE_FROM)',
  },
  {
    key: 'restore-unverified',
    arg: '[true|false]',
    default: 'false',
    meaning:
      'when no backup is verified, restore the newest unverified one (or the named one, unverified); a backup whose verification failed is never restored',
  },
  {
    key: 'restore-force',
    arg: '[true|false]',
    default: 'false',
    meaning:
      "restore a backup none of whose recorded members (name and peer URL) is an initial member of this pod: another cluster's, or an older agent's that records none",
  },
];

/** The agent's settings prepare uses (the others are accepted too). */
const AGENT_SETTINGS_USED = [
  'ETCD_AGENT_LISTEN',
  'ETCD_AGENT_ENDPOINTS',
  'ETCD_AGENT_MEMBER_NAME',
  'ETCD_AGENT_PEER_URL_TEMPLATE',
  'ETCD_AGENT_STATUS_TIMEOUT_MS',
  'ETCD_AGENT_KEY_PREFIX',
  'ETCD_AGENT_ETCD_CA_FILE',
  'ETCD_AGENT_ETCD_CERT_FILE',
  'ETCD_AGENT_ETCD_KEY_FILE',
  'ETCD_AGENT_ETCD_USERNAME',
  'ETCD_AGENT_ETCD_PASSWORD_FILE',
  'ETCD_AGENT_LOG_LEVEL',
  'ETCD_AGENT_ETCDUTL',
];

/** `etcd-lifecycle-agent prepare`: what its `--help` prints (usage.ts). */
export const PREPARE_USAGE: CommandUsage = {
  name: 'prepare',
  synopsis: '--data-dir DIR [--initial-cluster NAME=URL,...] [--flags-file FILE] [flags]',
  summary: "decide how this pod's etcd starts (an init container), write it as etcd's start flags, exit 0",
  details: [
    "It reads the data directory's WAL, the member list (through a quorum) and, only when nothing answers, the other initial members' prepare; " +
      'it joins this pod as a learner, or removes the member of a lost disk first, when that is what it takes. ' +
      'While it cannot decide safely it keeps trying and logs why (for a lost quorum, with the figures); its answer to the other initial members is served at ETCD_AGENT_LISTEN.',
    'With ETCD_AGENT_RESTORE_FROM it restores a backup when no cluster answers and every initial member reports its data gone: the initial member whose name sorts first restores and starts alone, the others wait and join it as learners.',
  ],
  options: [
    ...OWN_OPTIONS.map((o) => ({ flag: `--${o.key} ${o.arg}`, variable: VARIABLES[o.key], default: o.default, meaning: o.meaning })),
    ...settingsOptions(AGENT_SETTINGS_USED),
  ],
  notes: [
    'exit codes: 0 flags written, 1 not decided within the wait (run it again), 2 bad configuration, or a restore decided without a usable restore tool',
    'Every other flag and variable of serve is accepted too (etcd-lifecycle-agent serve --help).',
  ],
};

/** Reads prepare's options from `env` and `argv` (after the command name); throws ConfigError. */
/**
 * `sidecar`: the options of a serving agent's own prepare passes (the recovery's act, a survivor's
 * rejoin); it mounts etcd's data read-only, so its data directory need only be readable.
 */
export function loadPrepareOptions(env: NodeJS.ProcessEnv, argv: readonly string[], sidecar = false): PrepareOptions {
  const { config, rest } = loadConfig(env, argv);
  // `--restore-unverified` and `--restore-force` alone mean true, as the agent's boolean flags do (config.ts parseFlags).
  const args = rest.map((a, i) =>
    (a === '--restore-unverified' || a === '--restore-force') && (rest[i + 1] === undefined || rest[i + 1].startsWith('--'))
      ? `${a}=true`
      : a,
  );
  let values: Partial<Record<Key, string>>;
  try {
    values = parseArgs({
      args,
      strict: true,
      allowPositionals: false,
      options: Object.fromEntries(Object.keys(VARIABLES).map((k) => [k, { type: 'string' as const }])),
    }).values as Partial<Record<Key, string>>;
  } catch (err) {
    throw new ConfigError(ARGV, err instanceof Error ? err.message : String(err));
  }
  const raw = (key: Key): string | undefined => {
    const value = values[key] ?? env[VARIABLES[key]];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  };

  const dataDir = raw('data-dir');
  if (dataDir === undefined) throw new ConfigError(VARIABLES['data-dir'], 'is required: the etcd data directory (--data-dir)');
  const peerURL = ownPeerUrl(config, raw('peer-url'));
  const initial = parseInitialCluster(raw('initial-cluster'));
  const waitText = raw('wait-seconds') ?? String(DEFAULT_WAIT_SECONDS);
  if (!/^\d+$/.test(waitText) || Number(waitText) < 1 || Number(waitText) > MAX_WAIT_SECONDS) {
    throw new ConfigError(VARIABLES['wait-seconds'], `"${waitText}" must be a whole number from 1 to ${MAX_WAIT_SECONDS}`);
  }
  const flagsFile = path.resolve(raw('flags-file') ?? DEFAULT_FLAGS_FILE);
  // Checked now, so a path that cannot serve is one line and exit 2, not a failure half-way through.
  const dirProblem = unusableDirectory(path.resolve(dataDir), sidecar);
  if (dirProblem !== undefined) {
    const hint = dirProblem.includes('permission denied') ? `; ${TAKEOVER_HINT}` : '';
    throw new ConfigError(VARIABLES['data-dir'], `${dataDir} ${dirProblem}${hint}`);
  }
  // The init container runs as etcd's user: every file etcd will open must be usable by it.
  const entryProblem = sidecar ? undefined : unusableEntry(path.resolve(dataDir));
  if (entryProblem !== undefined) throw new ConfigError(VARIABLES['data-dir'], entryProblem);
  const flagsProblem = unwritableFile(flagsFile);
  if (flagsProblem !== undefined) throw new ConfigError(VARIABLES['flags-file'], `${flagsFile} ${flagsProblem}`);
  return {
    config,
    self: { name: config.memberName, peerURL },
    dataDir: path.resolve(dataDir),
    flagsFile,
    initial,
    token: raw('initial-cluster-token') ?? DEFAULT_TOKEN,
    waitSeconds: Number(waitText),
    // The sidecar's prepare passes never restore (it mounts etcd's data read-only): it has no restore.
    ...(sidecar ? {} : restoreOf(raw, config, initial)),
  };
}

function restoreOf(raw: (key: Key) => string | undefined, config: Config, initial: InitialMember[]): { restore?: RestoreOptions } {
  const restore = parseRestoreOptions(
    { from: raw('restore-from'), backup: raw('restore-backup'), unverified: raw('restore-unverified'), force: raw('restore-force') },
    { etcdutl: config.etcdutl, initialMembers: initial.length },
  );
  return restore === undefined ? {} : { restore };
}

function ownPeerUrl(config: Config, explicit: string | undefined): string {
  const variable = explicit === undefined ? 'ETCD_AGENT_PEER_URL_TEMPLATE' : VARIABLES['peer-url'];
  const raw =
    explicit ?? (config.peerUrlTemplate === undefined ? undefined : peerUrlFromTemplate(config.peerUrlTemplate, config.memberName));
  if (raw === undefined) throw new ConfigError(variable, `prepare needs this pod's peer URL: set ${variable} or ${VARIABLES['peer-url']}`);
  try {
    return validatePeerUrl(raw);
  } catch (err) {
    throw new ConfigError(variable, err instanceof Error ? err.message : String(err));
  }
}

/** `etcd-0=http://…:2380,etcd-1=…` → members; throws ConfigError on a malformed entry or a repeated name. */
export function parseInitialCluster(value: string | undefined): InitialMember[] {
  if (value === undefined) return [];
  const variable = VARIABLES['initial-cluster'];
  const members = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((entry) => {
      const eq = entry.indexOf('=');
      if (eq <= 0) throw new ConfigError(variable, `"${entry}" is not name=peerURL`);
      try {
        return { name: entry.slice(0, eq), peerURL: validatePeerUrl(entry.slice(eq + 1)) };
      } catch (err) {
        throw new ConfigError(variable, err instanceof Error ? err.message : String(err));
      }
    });
  const names = new Set(members.map((m) => m.name));
  if (names.size !== members.length) throw new ConfigError(variable, 'names a member twice');
  return members;
}
