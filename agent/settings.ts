/**
 * The one table of settings (CONTRACT §2): every `ETCD_AGENT_*` variable once, with its flag (derived
 * from the name), its default, how its value is parsed and what it means. config.ts builds `Config`
 * from it, `serve --help` prints it and the README's configuration table is generated from it
 * (test/unit/settings.test.ts holds the README to it).
 *
 * Invariant: the rows are in CONTRACT §2 order, and a parser either answers the setting's value or
 * throws a ConfigError naming its variable; the same variable, flag, default and message as before.
 */
import * as os from 'node:os';
import { parseCron, type CronSchedule } from './cron';
import { unreadableFile } from './paths';
import { parseRetention, type Retention } from './proto/maintenance';
import { isDnsSubdomain } from './proto/names';
import { peerUrlFromTemplate, validatePeerUrl } from './proto/urls';
import type { UsageOption } from './usage';

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

/**
 * Parses a variable's value: the trimmed value (flag or environment), else the row's `default`,
 * else undefined. `env` is the process environment, for values that fall back to another variable.
 */
type Parser<T> = (value: string | undefined, variable: string, env: NodeJS.ProcessEnv) => T;

/** One setting. `key` is its field in `Config`; a row without one is resolved by config.ts itself. */
export interface Setting<K extends string = string, T = unknown> {
  variable: string;
  key?: K;
  /** The value used when the variable is unset or empty. */
  default?: string;
  /** The README's default column when it is not `default` written as code (e.g. a fallback). */
  defaultDoc?: string;
  /** A bare flag (`--learner-first`) means true. */
  boolean?: true;
  /** The value is the path of a file the agent reads. */
  file?: true;
  parse: Parser<T>;
  /** The README's meaning column (Markdown). Consecutive rows with the same doc share one README row. */
  doc: string;
}

function row<K extends string, T>(setting: Setting<K, T> & { key: K }): Setting<K, T> & { key: K } {
  return setting;
}

const text: Parser<string | undefined> = (value) => value;

const boolean: Parser<boolean> = (value, variable) => {
  if (value !== undefined && /^(true|1|yes)$/i.test(value)) return true;
  if (value !== undefined && /^(false|0|no)$/i.test(value)) return false;
  throw new ConfigError(variable, `"${value}" is not a boolean (true or false)`);
};

function integer(min: number, max: number): Parser<number> {
  return (value, variable) => {
    if (value === undefined || !/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new ConfigError(variable, `"${value}" must be a whole number from ${min} to ${max}`);
    }
    return Number(value);
  };
}

/** A path other processes use too (a shell script writes it): absolute, one line. */
const absolutePath: Parser<string | undefined> = (file, variable) => {
  if (file === undefined) return undefined;
  if (!file.startsWith('/') || /[\r\n]/.test(file)) throw new ConfigError(variable, `"${file}" must be an absolute path`);
  return file;
};

const readableFile: Parser<string | undefined> = (file, variable) => {
  if (file === undefined) return undefined;
  const why = unreadableFile(file);
  if (why !== undefined) throw new ConfigError(variable, `cannot read file ${file}: it ${why}`);
  return file;
};

const listenAddress: Parser<{ host: string; port: number }> = (value = '', variable) => {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]*):(\d{1,5})$/.exec(value);
  const port = match ? Number(match[2]) : NaN;
  if (!match || port > 65535) {
    throw new ConfigError(variable, `"${value}" is not host:port (port 0-65535; port 0 picks a free one)`);
  }
  const host = match[1].replace(/^\[(.*)\]$/, '$1');
  return { host: host === '' ? '0.0.0.0' : host, port };
};

const urlList: Parser<string[]> = (value = '', variable) => {
  const items = value
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
};

const memberName: Parser<string> = (value, variable, env) => {
  // An empty POD_NAME counts as unset, like an empty ETCD_AGENT_* variable.
  const name = value ?? (env.POD_NAME?.trim() || os.hostname().toLowerCase());
  if (!isDnsSubdomain(name)) throw new ConfigError(variable, `"${name}" is not a DNS-1123 subdomain`);
  return name;
};

const peerTemplate: Parser<string | undefined> = (value, variable) => {
  if (value === undefined) return undefined;
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
};

const peerUrl: Parser<string | undefined> = (value, variable) => {
  if (value === undefined) return undefined;
  try {
    validatePeerUrl(value);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new ConfigError(variable, `"${value}" is not a peer URL (${why})`);
  }
  return value;
};

const keyPrefix: Parser<string> = (value = '', variable) => {
  if (!value.startsWith('/')) throw new ConfigError(variable, `"${value}" must start with /`);
  return value.endsWith('/') ? value : `${value}/`;
};

const logLevel: Parser<LogLevel> = (value = '', variable) => {
  const level = LOG_LEVELS.find((l) => l === value.toLowerCase());
  if (level === undefined) throw new ConfigError(variable, `"${value}" is not one of ${LOG_LEVELS.join(', ')}`);
  return level;
};

function fraction(min: number, max: number, minOpen = false): Parser<number> {
  return (value, variable) => {
    const n = value === undefined || !/^\d*\.?\d+$/.test(value) ? NaN : Number(value);
    if (!(minOpen ? n > min : n >= min) || n > max) {
      throw new ConfigError(variable, `"${value}" must be a number ${minOpen ? 'above' : 'from'} ${min} ${minOpen ? 'and at most' : 'to'} ${max}`);
    }
    return n;
  };
}

const cronSchedule: Parser<CronSchedule | undefined> = (value, variable) => {
  if (value === undefined) return undefined;
  try {
    return parseCron(value);
  } catch (err) {
    throw new ConfigError(variable, `not a cron schedule: ${err instanceof Error ? err.message : String(err)}`);
  }
};

const retention: Parser<Retention | undefined> = (value, variable) => {
  if (value === undefined) return undefined;
  try {
    return parseRetention(value, variable);
  } catch {
    throw new ConfigError(variable, `"${value}" is neither a number of revisions (e.g. 10000) nor a duration (e.g. 90s, 30m, 6h, 2d)`);
  }
};

const ETCD_TLS = 'TLS (and client certificate) to etcd';
const ETCD_AUTH = 'etcd authentication';
const AGENT_TLS = 'HTTPS for the agent itself; with a client CA, mutual TLS';

/** Every setting of CONTRACT §2, in its order. */
export const SETTINGS = [
  row({ variable: 'ETCD_AGENT_LISTEN', key: 'listen', default: '0.0.0.0:3501', parse: listenAddress,
    doc: 'HTTP listen address (`host:port`; port 0 = any free port, printed on start)' }),
  row({ variable: 'ETCD_AGENT_ENDPOINTS', key: 'endpoints', default: 'http://127.0.0.1:2379', parse: urlList,
    doc: 'comma-separated etcd client URLs (a headless Service name works); the agent also uses the client URLs the member list reports' }),
  row({ variable: 'ETCD_AGENT_MEMBER_NAME', key: 'memberName', defaultDoc: '`$POD_NAME`, else the host name', parse: memberName,
    doc: "this pod's member name" }),
  row({ variable: 'ETCD_AGENT_LOCAL_ENDPOINT', key: 'localEndpoint', default: 'http://127.0.0.1:2379',
    parse: (value, variable, env) => urlList(value, variable, env)[0] as string,
    doc: "this pod's own etcd, for `/v1/health/local` and `roleProbe`" }),
  row({ variable: 'ETCD_AGENT_PEER_URL_TEMPLATE', key: 'peerUrlTemplate', parse: peerTemplate,
    doc: "a member's peer URL from its name, e.g. `http://{name}.etcd-headless.demo.svc.cluster.local:2380` (`{name}`, `{fqdn}`)" }),
  row({ variable: 'ETCD_AGENT_LEARNER_FIRST', key: 'learnerFirst', default: 'true', boolean: true, parse: boolean,
    doc: 'new members join as learners and are promoted once in sync' }),
  row({ variable: 'ETCD_AGENT_HEALTH_MAX_AGE_MS', key: 'healthMaxAgeMs', default: '1000', parse: integer(50, 60_000),
    doc: 'the oldest observation `/v1/health` may serve' }),
  row({ variable: 'ETCD_AGENT_STATUS_TIMEOUT_MS', key: 'statusTimeoutMs', default: '500', parse: integer(10, 60_000),
    doc: "deadline of one member's status call; must be below the max age" }),
  row({ variable: 'ETCD_AGENT_TIMEOUT_SECONDS', key: 'timeoutSeconds', default: '30', parse: integer(1, 60),
    doc: 'deadline of a call that names none (a call may ask for 1–60)' }),
  row({ variable: 'ETCD_AGENT_KEY_PREFIX', key: 'keyPrefix', default: '/etcd-lifecycle-agent/', parse: keyPrefix,
    doc: 'etcd key prefix of the membership lock and operation records' }),
  row({ variable: 'ETCD_AGENT_TOKEN_FILE', key: 'tokenFile', file: true, parse: readableFile,
    doc: 'bearer token for mutating calls; re-read when it changes' }),
  row({ variable: 'ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED', key: 'allowRemoteUnauthenticated', default: 'false', boolean: true, parse: boolean,
    doc: 'accept mutating calls from anywhere without a token' }),
  // Resolved by config.ts (`hostNetwork`) with POD_IP and HOST_IP, after the other settings.
  { variable: 'ETCD_AGENT_HOST_NETWORK', default: 'auto', boolean: true, parse: text,
    doc: "`true` when the agent shares the node's network namespace (a `hostNetwork: true` pod, or a process on the host); `auto` decides from `POD_IP` = `HOST_IP` (downward API `status.podIP`, `status.hostIP`). There a mutating call needs the token from loopback too, and the agent does not start without `ETCD_AGENT_TOKEN_FILE`. `false` that `POD_IP` = `HOST_IP` contradicts stops start-up" } as Setting,
  row({ variable: 'ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK', key: 'hostNetworkAllowUnauthenticatedLoopback', default: 'false', boolean: true, parse: boolean,
    doc: "in the node's network namespace, accept mutating calls from loopback without a token all the same: every process on the node may then change membership" }),
  row({ variable: 'ETCD_AGENT_ETCD_CA_FILE', key: 'etcdCaFile', file: true, parse: readableFile, doc: ETCD_TLS }),
  row({ variable: 'ETCD_AGENT_ETCD_CERT_FILE', key: 'etcdCertFile', file: true, parse: readableFile, doc: ETCD_TLS }),
  row({ variable: 'ETCD_AGENT_ETCD_KEY_FILE', key: 'etcdKeyFile', file: true, parse: readableFile, doc: ETCD_TLS }),
  row({ variable: 'ETCD_AGENT_ETCD_USERNAME', key: 'etcdUsername', parse: text, doc: ETCD_AUTH }),
  row({ variable: 'ETCD_AGENT_ETCD_PASSWORD_FILE', key: 'etcdPasswordFile', file: true, parse: readableFile, doc: ETCD_AUTH }),
  row({ variable: 'ETCD_AGENT_TLS_CERT_FILE', key: 'tlsCertFile', file: true, parse: readableFile, doc: AGENT_TLS }),
  row({ variable: 'ETCD_AGENT_TLS_KEY_FILE', key: 'tlsKeyFile', file: true, parse: readableFile, doc: AGENT_TLS }),
  row({ variable: 'ETCD_AGENT_TLS_CLIENT_CA_FILE', key: 'tlsClientCaFile', file: true, parse: readableFile, doc: AGENT_TLS }),
  row({ variable: 'ETCD_AGENT_LOG_LEVEL', key: 'logLevel', default: 'info', parse: logLevel,
    doc: 'winston level; logs are one JSON object per line on stdout' }),
  // Unset, config.ts derives it from the peer URL template and the member name.
  row({ variable: 'ETCD_AGENT_LOCAL_PEER_URL', key: 'localPeerUrl', parse: peerUrl,
    defaultDoc: 'from `ETCD_AGENT_PEER_URL_TEMPLATE` and the member name, else none',
    doc: "this pod's member's peer URL: where a learner's agent reads the member list (`GET <peer URL>/members`) to find the voters" }),
  row({ variable: 'ETCD_AGENT_RECOVERY_MIN_LOSS_SECONDS', key: 'recoveryMinLossSeconds', default: '300', parse: integer(1, 86_400),
    doc: 'how long this agent must have seen the quorum lost, without a break, before `POST /v1/recovery` may act (see "When the quorum is lost")' }),
  row({ variable: 'ETCD_AGENT_START_NOTE_FILE', key: 'startNoteFile', parse: absolutePath,
    doc: "where the etcd container's start script leaves the line with which it refused to start etcd (an etcd older than its data, see \"Upgrading etcd\"); `/v1/health/local` and this member in `/v1/health` name it while its etcd is down. kube-inject's start script writes it as `etcd-start-note` beside the flags file, so it must name that file; kube-inject sets it" }),
  // Maintenance (README "Maintenance"): the schedule and the defaults of POST /v1/maintenance/defragment.
  row({ variable: 'ETCD_AGENT_DEFRAG_SCHEDULE', key: 'defragSchedule', parse: cronSchedule,
    doc: 'when this agent defragments the cluster by itself: a cron expression in UTC (`0 3 * * 0`, `@daily`); every sidecar may have it, the cluster lock lets one run at a time, and a run with nothing to do or an unhealthy cluster is skipped (logged, `etcd_agent_defrag_schedule_skips_total`)' }),
  row({ variable: 'ETCD_AGENT_DEFRAG_MIN_FRAGMENTATION', key: 'defragMinFragmentation', default: '0.45', parse: fraction(0, 1, true),
    doc: "a member is defragmented when its fragmentation, (dbSize − dbSizeInUse) / dbSize, is at least this (OpenShift's 45 %)" }),
  row({ variable: 'ETCD_AGENT_DEFRAG_MIN_DB_SIZE_BYTES', key: 'defragMinDbSizeBytes', default: '104857600', parse: integer(0, Number.MAX_SAFE_INTEGER),
    doc: "and its database is at least this big (OpenShift's 100 MiB); under NOSPACE every member over its quota less the margin is defragmented whatever its size" }),
  row({ variable: 'ETCD_AGENT_DEFRAG_COMPACT_RETAIN', key: 'defragCompactRetain', parse: retention,
    doc: 'compact the key history first, keeping the last N revisions (`10000`) or the last period (`90s`, `30m`, `6h`, `2d`); none: no compaction' }),
  row({ variable: 'ETCD_AGENT_DEFRAG_QUOTA_MARGIN', key: 'defragQuotaMargin', default: '0.1', parse: fraction(0, 0.9),
    doc: "NOSPACE is disarmed only when every voter's database is below its quota by at least this fraction of the quota" }),
] as const;

/** The settings whose value is the path of a file the agent reads. */
export const FILE_SETTINGS: readonly string[] = (SETTINGS as readonly Setting[]).filter((s) => s.file).map((s) => s.variable);

/** `ETCD_AGENT_HEALTH_MAX_AGE_MS` → `--health-max-age-ms`. */
export function flagFor(variable: string): string {
  return `--${variable.replace(/^ETCD_AGENT_/, '').toLowerCase().replace(/_/g, '-')}`;
}

/** The README's default column of a setting. */
function defaultColumn(s: Setting): string {
  return s.defaultDoc ?? (s.default === undefined ? 'none' : `\`${s.default}\``);
}

/** The README's configuration table (Markdown), rows sharing a meaning and default merged as today. */
export function readmeTable(): string {
  const lines = ['| variable | default | meaning |', '|---|---|---|'];
  const settings: readonly Setting[] = SETTINGS;
  for (let i = 0; i < settings.length; ) {
    const group = [settings[i] as Setting];
    while (i + group.length < settings.length) {
      const next = settings[i + group.length] as Setting;
      if (next.doc !== group[0].doc || defaultColumn(next) !== defaultColumn(group[0])) break;
      group.push(next);
    }
    const names = group.map((s, n) => `\`${n === 0 ? s.variable : s.variable.replace(/^ETCD_AGENT/, '')}\``).join(', ');
    lines.push(`| ${names} | ${defaultColumn(group[0])} | ${group[0].doc} |`);
    i += group.length;
  }
  return `${lines.join('\n')}\n`;
}

/**
 * The settings as `--help` lists them (usage.ts): each one's flag, variable, default and meaning, in
 * table order; only those of `variables` when given (prepare lists the ones it uses).
 */
export function settingsOptions(variables?: readonly string[]): UsageOption[] {
  return (SETTINGS as readonly Setting[])
    .filter((s) => variables === undefined || variables.includes(s.variable))
    .map((s) => ({ flag: flagFor(s.variable), variable: s.variable, default: defaultColumn(s), meaning: s.doc }));
}
