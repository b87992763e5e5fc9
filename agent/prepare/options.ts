/**
 * `etcd-lifecycle-agent prepare` options: the agent's own configuration
 * (endpoints, member name, peer URL template, TLS, listen address for the
 * answer peers read) plus what only prepare needs. Each has an environment
 * variable and a `--flag` twin; the flag wins; a bad value is a ConfigError
 * naming the variable (exit 2), as for `serve`.
 */
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { Config, ConfigError, loadConfig } from '../config';
import { peerUrlFromTemplate, validatePeerUrl } from '../proto/urls';
import type { InitialMember } from './decide';

/** Where the etcd container's command sources its start flags from, unless told otherwise. */
export const DEFAULT_FLAGS_FILE = '/var/run/etcd-lifecycle-agent/etcd-flags.sh';

/** etcd's own default `--initial-cluster-token`. */
export const DEFAULT_TOKEN = 'etcd-cluster';

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
}

const VARIABLES = {
  'data-dir': 'ETCD_AGENT_DATA_DIR',
  'flags-file': 'ETCD_AGENT_PREPARE_FLAGS_FILE',
  'initial-cluster': 'ETCD_AGENT_INITIAL_CLUSTER',
  'initial-cluster-token': 'ETCD_AGENT_INITIAL_CLUSTER_TOKEN',
  'peer-url': 'ETCD_AGENT_PEER_URL',
  'wait-seconds': 'ETCD_AGENT_PREPARE_WAIT_SECONDS',
} as const;

type Key = keyof typeof VARIABLES;

/** Reads prepare's options from `env` and `argv` (after the command name); throws ConfigError. */
export function loadPrepareOptions(env: NodeJS.ProcessEnv, argv: readonly string[]): PrepareOptions {
  const { config, rest } = loadConfig(env, argv);
  let values: Partial<Record<Key, string>>;
  try {
    values = parseArgs({
      args: [...rest],
      strict: true,
      allowPositionals: false,
      options: Object.fromEntries(Object.keys(VARIABLES).map((k) => [k, { type: 'string' as const }])),
    }).values as Partial<Record<Key, string>>;
  } catch (err) {
    throw new ConfigError('argv', err instanceof Error ? err.message : String(err));
  }
  const raw = (key: Key): string | undefined => {
    const value = values[key] ?? env[VARIABLES[key]];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  };

  const dataDir = raw('data-dir');
  if (dataDir === undefined) throw new ConfigError(VARIABLES['data-dir'], 'is required: the etcd data directory (--data-dir)');
  const peerURL = ownPeerUrl(config, raw('peer-url'));
  const initial = parseInitialCluster(raw('initial-cluster'));
  const waitText = raw('wait-seconds') ?? '60';
  if (!/^\d+$/.test(waitText) || Number(waitText) < 1 || Number(waitText) > 3600) {
    throw new ConfigError(VARIABLES['wait-seconds'], `"${waitText}" must be a whole number from 1 to 3600`);
  }
  return {
    config,
    self: { name: config.memberName, peerURL },
    dataDir: path.resolve(dataDir),
    flagsFile: path.resolve(raw('flags-file') ?? DEFAULT_FLAGS_FILE),
    initial,
    token: raw('initial-cluster-token') ?? DEFAULT_TOKEN,
    waitSeconds: Number(waitText),
  };
}

function ownPeerUrl(config: Config, explicit: string | undefined): string {
  const variable = explicit === undefined ? 'ETCD_AGENT_PEER_URL_TEMPLATE' : VARIABLES['peer-url'];
  const raw = explicit ?? (config.peerUrlTemplate === undefined ? undefined : peerUrlFromTemplate(config.peerUrlTemplate, config.memberName));
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
