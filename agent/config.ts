/**
 * Configuration (CONTRACT §2): environment variables, each with a `--flag` twin
 * that wins, validated once at start-up into one frozen `Config`.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import { hostNetworkSetting, resolveHostNetwork } from './host-network';
import { peerUrlFromTemplate, validatePeerUrl } from './membership/match';
import { startupAuthRefusal } from './server/auth';

/** The agent's validated configuration. */
export interface Config {
  listen: { host: string; port: number };
  endpoints: string[];
  memberName: string;
  localEndpoint: string;
  peerUrlTemplate?: string;
  learnerFirst: boolean;
  healthMaxAgeMs: number;
  statusTimeoutMs: number;
  timeoutSeconds: number;
  keyPrefix: string;
  tokenFile?: string;
  allowRemoteUnauthenticated: boolean;
  etcdCaFile?: string;
  etcdCertFile?: string;
  etcdKeyFile?: string;
  etcdUsername?: string;
  etcdPasswordFile?: string;
  tlsCertFile?: string;
  tlsKeyFile?: string;
  tlsClientCaFile?: string;
  logLevel: LogLevel;
  /** The agent shares the node's network namespace (`host-network.ts`): loopback vouches for nobody. */
  hostNetwork: boolean;
  /** In the node's network namespace, accept mutating calls from loopback without a token all the same. */
  hostNetworkAllowUnauthenticatedLoopback: boolean;
  /** This pod's member's peer URL: where a learner's agent reads the member list (`GET <peer URL>/members`). */
  localPeerUrl?: string;
}

/** winston's npm levels, the only ones `ETCD_AGENT_LOG_LEVEL` accepts. */
export const LOG_LEVELS = ['error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly'] as const;
/** One of winston's npm levels. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** A bad configuration value; `variable` names the environment variable it came from. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

type Raw = (variable: string) => string | undefined;

/** Every variable of CONTRACT §2, in table order; the flag is derived from the name. */
export const CONFIG_VARIABLES = [
  'ETCD_AGENT_LISTEN',
  'ETCD_AGENT_ENDPOINTS',
  'ETCD_AGENT_MEMBER_NAME',
  'ETCD_AGENT_LOCAL_ENDPOINT',
  'ETCD_AGENT_PEER_URL_TEMPLATE',
  'ETCD_AGENT_LEARNER_FIRST',
  'ETCD_AGENT_HEALTH_MAX_AGE_MS',
  'ETCD_AGENT_STATUS_TIMEOUT_MS',
  'ETCD_AGENT_TIMEOUT_SECONDS',
  'ETCD_AGENT_KEY_PREFIX',
  'ETCD_AGENT_TOKEN_FILE',
  'ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED',
  'ETCD_AGENT_HOST_NETWORK',
  'ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK',
  'ETCD_AGENT_ETCD_CA_FILE',
  'ETCD_AGENT_ETCD_CERT_FILE',
  'ETCD_AGENT_ETCD_KEY_FILE',
  'ETCD_AGENT_ETCD_USERNAME',
  'ETCD_AGENT_ETCD_PASSWORD_FILE',
  'ETCD_AGENT_TLS_CERT_FILE',
  'ETCD_AGENT_TLS_KEY_FILE',
  'ETCD_AGENT_TLS_CLIENT_CA_FILE',
  'ETCD_AGENT_LOG_LEVEL',
  'ETCD_AGENT_LOCAL_PEER_URL',
] as const;

/** `ETCD_AGENT_HEALTH_MAX_AGE_MS` → `--health-max-age-ms`. */
export function flagFor(variable: string): string {
  return `--${variable.replace(/^ETCD_AGENT_/, '').toLowerCase().replace(/_/g, '-')}`;
}

/** Variables whose flag may stand alone for `true` (`--host-network` also takes `=auto` or `=false`). */
const BOOLEAN_VARIABLES = new Set<string>([
  'ETCD_AGENT_LEARNER_FIRST',
  'ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED',
  'ETCD_AGENT_HOST_NETWORK',
  'ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK',
]);
const FLAG_TO_VARIABLE = new Map<string, string>(CONFIG_VARIABLES.map((v) => [flagFor(v), v]));

/**
 * Splits `argv` (after the sub-command) into configuration flags and the rest.
 * Accepts `--flag value`, `--flag=value`, and a bare `--flag` for booleans.
 */
export function parseFlags(argv: readonly string[]): { flags: Map<string, string>; rest: string[] } {
  const flags = new Map<string, string>();
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const eq = arg.indexOf('=');
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const variable = FLAG_TO_VARIABLE.get(flag);
    if (variable === undefined) {
      rest.push(arg);
      continue;
    }
    if (eq > 0) {
      flags.set(variable, arg.slice(eq + 1));
    } else if (BOOLEAN_VARIABLES.has(variable) && (argv[i + 1] === undefined || argv[i + 1].startsWith('--'))) {
      flags.set(variable, 'true');
    } else if (argv[i + 1] === undefined) {
      throw new ConfigError(variable, `${flag} needs a value`);
    } else {
      flags.set(variable, argv[++i]);
    }
  }
  return { flags, rest };
}

/** Reads the configuration from the environment and flags; throws ConfigError on the first bad value. */
export function loadConfig(env: NodeJS.ProcessEnv, argv: readonly string[] = []): { config: Config; rest: string[] } {
  const { flags, rest } = parseFlags(argv);
  const raw: Raw = (variable) => {
    const value = flags.has(variable) ? flags.get(variable) : env[variable];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  };
  return { config: buildConfig(raw, env), rest };
}

function buildConfig(raw: Raw, env: NodeJS.ProcessEnv): Config {
  // An empty POD_NAME counts as unset, like an empty ETCD_AGENT_* variable.
  const memberName = raw('ETCD_AGENT_MEMBER_NAME') ?? (env.POD_NAME?.trim() || os.hostname().toLowerCase());
  if (!isDnsSubdomain(memberName)) {
    throw new ConfigError('ETCD_AGENT_MEMBER_NAME', `"${memberName}" is not a DNS-1123 subdomain`);
  }
  const healthMaxAgeMs = integer(raw, 'ETCD_AGENT_HEALTH_MAX_AGE_MS', 1000, 50, 60_000);
  const statusTimeoutMs = integer(raw, 'ETCD_AGENT_STATUS_TIMEOUT_MS', 500, 10, 60_000);
  if (statusTimeoutMs >= healthMaxAgeMs) {
    // A status deadline at or above the max age would make one silent member turn
    // every observation late (`unknown`) instead of `degraded`.
    throw new ConfigError(
      'ETCD_AGENT_STATUS_TIMEOUT_MS',
      `${statusTimeoutMs} must be below ETCD_AGENT_HEALTH_MAX_AGE_MS (${healthMaxAgeMs})`,
    );
  }
  const config: Config = {
    listen: listenAddress(raw('ETCD_AGENT_LISTEN') ?? '0.0.0.0:3501'),
    endpoints: urlList(raw, 'ETCD_AGENT_ENDPOINTS', 'http://127.0.0.1:2379'),
    memberName,
    localEndpoint: urlList(raw, 'ETCD_AGENT_LOCAL_ENDPOINT', 'http://127.0.0.1:2379')[0],
    peerUrlTemplate: peerTemplate(raw('ETCD_AGENT_PEER_URL_TEMPLATE')),
    learnerFirst: boolean(raw, 'ETCD_AGENT_LEARNER_FIRST', true),
    healthMaxAgeMs,
    statusTimeoutMs,
    timeoutSeconds: integer(raw, 'ETCD_AGENT_TIMEOUT_SECONDS', 30, 1, 60),
    keyPrefix: keyPrefix(raw('ETCD_AGENT_KEY_PREFIX') ?? '/etcd-lifecycle-agent/'),
    tokenFile: readableFile(raw, 'ETCD_AGENT_TOKEN_FILE'),
    allowRemoteUnauthenticated: boolean(raw, 'ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED', false),
    etcdCaFile: readableFile(raw, 'ETCD_AGENT_ETCD_CA_FILE'),
    etcdCertFile: readableFile(raw, 'ETCD_AGENT_ETCD_CERT_FILE'),
    etcdKeyFile: readableFile(raw, 'ETCD_AGENT_ETCD_KEY_FILE'),
    etcdUsername: raw('ETCD_AGENT_ETCD_USERNAME'),
    etcdPasswordFile: readableFile(raw, 'ETCD_AGENT_ETCD_PASSWORD_FILE'),
    tlsCertFile: readableFile(raw, 'ETCD_AGENT_TLS_CERT_FILE'),
    tlsKeyFile: readableFile(raw, 'ETCD_AGENT_TLS_KEY_FILE'),
    tlsClientCaFile: readableFile(raw, 'ETCD_AGENT_TLS_CLIENT_CA_FILE'),
    logLevel: logLevel(raw('ETCD_AGENT_LOG_LEVEL') ?? 'info'),
    hostNetwork: false,
    hostNetworkAllowUnauthenticatedLoopback: boolean(raw, 'ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK', false),
    localPeerUrl: localPeerUrl(raw('ETCD_AGENT_LOCAL_PEER_URL'), raw('ETCD_AGENT_PEER_URL_TEMPLATE'), memberName),
  };
  pairs(config);
  hostNetworkAuth(config, raw, env);
  return Object.freeze(config);
}

/** Sets `hostNetwork`, and refuses a host-network agent that any process on the node could command. */
function hostNetworkAuth(config: Config, raw: Raw, env: NodeJS.ProcessEnv): void {
  const variable = 'ETCD_AGENT_HOST_NETWORK';
  const value = raw(variable) ?? 'auto';
  const setting = hostNetworkSetting(value);
  if (setting === undefined) throw new ConfigError(variable, `"${value}" is not true, false or auto`);
  const answer = resolveHostNetwork({ setting, podIp: env.POD_IP, hostIp: env.HOST_IP });
  if ('conflict' in answer) throw new ConfigError(variable, answer.conflict);
  config.hostNetwork = answer.hostNetwork;
  const refusal = startupAuthRefusal({
    tokenConfigured: config.tokenFile !== undefined,
    allowRemoteUnauthenticated: config.allowRemoteUnauthenticated,
    hostNetwork: config.hostNetwork,
    hostNetworkAllowUnauthenticatedLoopback: config.hostNetworkAllowUnauthenticatedLoopback,
    hostNetworkReason: answer.reason,
  });
  if (refusal !== undefined) throw new ConfigError(refusal.variable, refusal.message);
}

function pairs(config: Config): void {
  const together: Array<[string, unknown, string, unknown]> = [
    ['ETCD_AGENT_ETCD_CERT_FILE', config.etcdCertFile, 'ETCD_AGENT_ETCD_KEY_FILE', config.etcdKeyFile],
    ['ETCD_AGENT_TLS_CERT_FILE', config.tlsCertFile, 'ETCD_AGENT_TLS_KEY_FILE', config.tlsKeyFile],
    ['ETCD_AGENT_ETCD_PASSWORD_FILE', config.etcdPasswordFile, 'ETCD_AGENT_ETCD_USERNAME', config.etcdUsername],
  ];
  for (const [a, va, b, vb] of together) {
    if ((va === undefined) !== (vb === undefined)) {
      const [set, missing] = va === undefined ? [b, a] : [a, b];
      throw new ConfigError(missing, `must be set together with ${set}`);
    }
  }
  if (config.tlsClientCaFile !== undefined && config.tlsCertFile === undefined) {
    throw new ConfigError('ETCD_AGENT_TLS_CLIENT_CA_FILE', 'needs ETCD_AGENT_TLS_CERT_FILE and ETCD_AGENT_TLS_KEY_FILE');
  }
  for (const url of [...config.endpoints, config.localEndpoint]) {
    if (url.startsWith('https:') && config.etcdCaFile === undefined) {
      // Without a CA the agent would have to trust any certificate etcd shows.
      throw new ConfigError('ETCD_AGENT_ETCD_CA_FILE', `is required for the https endpoint ${url}`);
    }
  }
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** True for a Kubernetes DNS-1123 subdomain (at most 253 characters). */
export function isDnsSubdomain(value: string): boolean {
  return value.length > 0 && value.length <= 253 && DNS_SUBDOMAIN.test(value);
}

function listenAddress(value: string): { host: string; port: number } {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]*):(\d{1,5})$/.exec(value);
  const port = match ? Number(match[2]) : NaN;
  if (!match || port > 65535) {
    throw new ConfigError('ETCD_AGENT_LISTEN', `"${value}" is not host:port (port 0-65535; port 0 picks a free one)`);
  }
  const host = match[1].replace(/^\[(.*)\]$/, '$1');
  return { host: host === '' ? '0.0.0.0' : host, port };
}

function urlList(raw: Raw, variable: string, fallback: string): string[] {
  const items = (raw(variable) ?? fallback)
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (items.length === 0) throw new ConfigError(variable, 'needs at least one URL');
  return items.map((item) => {
    let url: URL;
    try {
      url = new URL(item);
    } catch {
      throw new ConfigError(variable, `"${item}" is not a URL (expected http://host:port)`);
    }
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
      throw new ConfigError(variable, `"${item}" must be an http or https URL with a host`);
    }
    if (url.username || url.password || (url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
      throw new ConfigError(variable, `"${item}" must have no user, path, query or fragment`);
    }
    return `${url.protocol}//${url.host}`;
  });
}

function peerTemplate(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const variable = 'ETCD_AGENT_PEER_URL_TEMPLATE';
  if (!value.includes('{name}') && !value.includes('{fqdn}')) {
    throw new ConfigError(variable, `"${value}" contains neither {name} nor {fqdn}`);
  }
  // Checked as join checks the peer URLs it makes (CONTRACT §4), so a template that can only make
  // refused URLs (a path, no port) stops start-up instead of failing every join.
  const sample = peerUrlFromTemplate(value, 'member-0');
  try {
    validatePeerUrl(sample);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new ConfigError(variable, `"${value}" must make an http or https URL with a host and an explicit port only (${why})`);
  }
  return value;
}

/** `ETCD_AGENT_LOCAL_PEER_URL`, else the peer URL the template makes of this pod's member name, else none. */
function localPeerUrl(value: string | undefined, template: string | undefined, memberName: string): string | undefined {
  if (value === undefined) return template === undefined ? undefined : peerUrlFromTemplate(template, memberName);
  try {
    validatePeerUrl(value);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new ConfigError('ETCD_AGENT_LOCAL_PEER_URL', `"${value}" is not a peer URL (${why})`);
  }
  return value;
}

function boolean(raw: Raw, variable: string, fallback: boolean): boolean {
  const value = raw(variable);
  if (value === undefined) return fallback;
  if (/^(true|1|yes)$/i.test(value)) return true;
  if (/^(false|0|no)$/i.test(value)) return false;
  throw new ConfigError(variable, `"${value}" is not a boolean (true or false)`);
}

function integer(raw: Raw, variable: string, fallback: number, min: number, max: number): number {
  const value = raw(variable);
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ConfigError(variable, `"${value}" must be a whole number from ${min} to ${max}`);
  }
  return Number(value);
}

function keyPrefix(value: string): string {
  if (!value.startsWith('/')) throw new ConfigError('ETCD_AGENT_KEY_PREFIX', `"${value}" must start with /`);
  return value.endsWith('/') ? value : `${value}/`;
}

function readableFile(raw: Raw, variable: string): string | undefined {
  const file = raw(variable);
  if (file === undefined) return undefined;
  try {
    fs.accessSync(file, fs.constants.R_OK);
    if (!fs.statSync(file).isFile()) throw new Error('not a file');
  } catch {
    throw new ConfigError(variable, `cannot read file ${file}`);
  }
  return file;
}

function logLevel(value: string): LogLevel {
  const level = LOG_LEVELS.find((l) => l === value.toLowerCase());
  if (level === undefined) {
    throw new ConfigError('ETCD_AGENT_LOG_LEVEL', `"${value}" is not one of ${LOG_LEVELS.join(', ')}`);
  }
  return level;
}
