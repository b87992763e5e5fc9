/**
 * The one table of settings (docs/api.md §2): every `ETCD_AGENT_*` variable once, with its flag
 * (derived from the name), its default, how its value is parsed and what it means. config.ts builds
 * `Config` from it, `serve --help` prints it, and docs/configuration.md's table is generated from it
 * (`npm run docs:config`; test/unit/settings.test.ts fails when the two differ).
 *
 * Invariant: the rows are in docs/api.md §2 order, and a parser either answers the setting's value or
 * throws a ConfigError naming its variable.
 */
import type { UsageOption } from '../lib/usage';
import {
  type Parser,
  absolutePath,
  boolean,
  cronSchedule,
  durationSeconds,
  fraction,
  integer,
  keyPrefix,
  listenAddress,
  logLevel,
  memberName,
  optionalInteger,
  peerTemplate,
  peerUrl,
  program,
  readableFile,
  retention,
  storeLocation,
  text,
  urlList,
} from './setting-parsers';

export { ConfigError, LOG_LEVELS, type LogLevel } from './setting-parsers';

/** One setting. `key` is its field in `Config`; a row without one is resolved by config.ts itself. */
export interface Setting<K extends string = string, T = unknown> {
  variable: string;
  key?: K;
  /** The value used when the variable is unset or empty. */
  default?: string;
  /** The documented default column when it is not `default` written as code (e.g. a fallback). */
  defaultDoc?: string;
  /** A bare flag (`--learner-first`) means true. */
  boolean?: true;
  /** The value is the path of a file the agent reads. */
  file?: true;
  parse: Parser<T>;
  /** The meaning column (Markdown). Consecutive rows with the same doc and default share one row. */
  doc: string;
}

function row<K extends string, T>(setting: Setting<K, T> & { key: K }): Setting<K, T> & { key: K } {
  return setting;
}

const ETCD_TLS = 'TLS (and client certificate) to etcd';
const ETCD_AUTH = 'etcd authentication';
const AGENT_TLS = 'HTTPS for the agent itself; with a client CA, mutual TLS';

/** Every setting of docs/api.md §2, in its order. */
export const SETTINGS = [
  row({
    variable: 'ETCD_AGENT_LISTEN',
    key: 'listen',
    default: '0.0.0.0:3501',
    parse: listenAddress,
    doc: 'HTTP listen address (`host:port`; port 0 = any free port, printed on start)',
  }),
  row({
    variable: 'ETCD_AGENT_ENDPOINTS',
    key: 'endpoints',
    default: 'http://127.0.0.1:2379',
    parse: urlList,
    doc: 'comma-separated etcd client URLs (a headless Service name works); the agent also uses the client URLs the member list reports',
  }),
  row({
    variable: 'ETCD_AGENT_MEMBER_NAME',
    key: 'memberName',
    defaultDoc: '`$POD_NAME`, else the host name',
    parse: memberName,
    doc: "this pod's member name",
  }),
  row({
    variable: 'ETCD_AGENT_LOCAL_ENDPOINT',
    key: 'localEndpoint',
    default: 'http://127.0.0.1:2379',
    parse: (value, variable, env) => urlList(value, variable, env)[0] as string,
    doc: "this pod's own etcd, for `/v1/health/local` and `roleProbe`",
  }),
  row({
    variable: 'ETCD_AGENT_PEER_URL_TEMPLATE',
    key: 'peerUrlTemplate',
    parse: peerTemplate,
    doc: "a member's peer URL from its name, e.g. `http://{name}.etcd-headless.demo.svc.cluster.local:2380` (`{name}`, `{fqdn}`)",
  }),
  row({
    variable: 'ETCD_AGENT_LEARNER_FIRST',
    key: 'learnerFirst',
    default: 'true',
    boolean: true,
    parse: boolean,
    doc: 'new members join as learners and are promoted once in sync',
  }),
  row({
    variable: 'ETCD_AGENT_HEALTH_MAX_AGE_MS',
    key: 'healthMaxAgeMs',
    default: '1000',
    parse: integer(50, 60_000),
    doc: 'the oldest observation `/v1/health` may serve',
  }),
  row({
    variable: 'ETCD_AGENT_STATUS_TIMEOUT_MS',
    key: 'statusTimeoutMs',
    default: '500',
    parse: integer(10, 60_000),
    doc: "deadline of one member's status call; must be below the max age",
  }),
  row({
    variable: 'ETCD_AGENT_TIMEOUT_SECONDS',
    key: 'timeoutSeconds',
    default: '30',
    parse: integer(1, 60),
    doc: 'deadline of a call that names none (a call may ask for 1–60)',
  }),
  row({
    variable: 'ETCD_AGENT_KEY_PREFIX',
    key: 'keyPrefix',
    default: '/etcd-lifecycle-agent/',
    parse: keyPrefix,
    doc: 'etcd key prefix of the membership lock and operation records',
  }),
  row({
    variable: 'ETCD_AGENT_TOKEN_FILE',
    key: 'tokenFile',
    file: true,
    parse: readableFile,
    doc: 'bearer token for mutating calls; re-read when it changes',
  }),
  row({
    variable: 'ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED',
    key: 'allowRemoteUnauthenticated',
    default: 'false',
    boolean: true,
    parse: boolean,
    doc: 'accept mutating calls from anywhere without a token',
  }),
  // Resolved by config.ts (`hostNetwork`) with POD_IP and HOST_IP, after the other settings.
  {
    variable: 'ETCD_AGENT_HOST_NETWORK',
    default: 'auto',
    boolean: true,
    parse: text,
    doc: "`true` when the agent shares the node's network namespace (a `hostNetwork: true` pod, or a process on the host); `auto` decides from `POD_IP` = `HOST_IP` (downward API `status.podIP`, `status.hostIP`). There a mutating call needs the token from loopback too, and the agent does not start without `ETCD_AGENT_TOKEN_FILE`. `false` that `POD_IP` = `HOST_IP` contradicts stops start-up",
  } as Setting,
  row({
    variable: 'ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK',
    key: 'hostNetworkAllowUnauthenticatedLoopback',
    default: 'false',
    boolean: true,
    parse: boolean,
    doc: "in the node's network namespace, accept mutating calls from loopback without a token all the same: every process on the node may then change membership",
  }),
  row({ variable: 'ETCD_AGENT_ETCD_CA_FILE', key: 'etcdCaFile', file: true, parse: readableFile, doc: ETCD_TLS }),
  row({ variable: 'ETCD_AGENT_ETCD_CERT_FILE', key: 'etcdCertFile', file: true, parse: readableFile, doc: ETCD_TLS }),
  row({ variable: 'ETCD_AGENT_ETCD_KEY_FILE', key: 'etcdKeyFile', file: true, parse: readableFile, doc: ETCD_TLS }),
  row({ variable: 'ETCD_AGENT_ETCD_USERNAME', key: 'etcdUsername', parse: text, doc: ETCD_AUTH }),
  row({ variable: 'ETCD_AGENT_ETCD_PASSWORD_FILE', key: 'etcdPasswordFile', file: true, parse: readableFile, doc: ETCD_AUTH }),
  row({ variable: 'ETCD_AGENT_TLS_CERT_FILE', key: 'tlsCertFile', file: true, parse: readableFile, doc: AGENT_TLS }),
  row({ variable: 'ETCD_AGENT_TLS_KEY_FILE', key: 'tlsKeyFile', file: true, parse: readableFile, doc: AGENT_TLS }),
  row({ variable: 'ETCD_AGENT_TLS_CLIENT_CA_FILE', key: 'tlsClientCaFile', file: true, parse: readableFile, doc: AGENT_TLS }),
  row({
    variable: 'ETCD_AGENT_LOG_LEVEL',
    key: 'logLevel',
    default: 'info',
    parse: logLevel,
    doc: 'winston level; logs are one JSON object per line on stdout',
  }),
  // Unset, config.ts derives it from the peer URL template and the member name.
  row({
    variable: 'ETCD_AGENT_LOCAL_PEER_URL',
    key: 'localPeerUrl',
    parse: peerUrl,
    defaultDoc: 'from `ETCD_AGENT_PEER_URL_TEMPLATE` and the member name, else none',
    doc: "this pod's member's peer URL: where a learner's agent reads the member list (`GET <peer URL>/members`) to find the voters",
  }),
  row({
    variable: 'ETCD_AGENT_RECOVERY_MIN_LOSS_SECONDS',
    key: 'recoveryMinLossSeconds',
    default: '300',
    parse: integer(1, 86_400),
    doc: 'how long this agent must have seen the quorum lost, without a break, before `POST /v1/recovery` may act (docs/operations/quorum-loss-recovery.md)',
  }),
  row({
    variable: 'ETCD_AGENT_START_NOTE_FILE',
    key: 'startNoteFile',
    parse: absolutePath,
    doc: "where the etcd container's start script leaves the line with which it refused to start etcd (an etcd older than its data: docs/operations/upgrading-etcd.md); `/v1/health/local` and this member in `/v1/health` name it while its etcd is down. kube-inject's start script writes it as `etcd-start-note` beside the flags file, so it must name that file; kube-inject sets it",
  }),
  // Maintenance (docs/operations/defragmentation.md): the schedule and the defaults of POST /v1/maintenance/defragment.
  row({
    variable: 'ETCD_AGENT_DEFRAG_SCHEDULE',
    key: 'defragSchedule',
    parse: cronSchedule,
    doc: 'when this agent defragments the cluster by itself: a cron expression in UTC (`0 3 * * 0`, `@daily`); every sidecar may have it, the cluster lock lets one run at a time, and a run with nothing to do or an unhealthy cluster is skipped (logged, `etcd_agent_defrag_schedule_skips_total`)',
  }),
  row({
    variable: 'ETCD_AGENT_DEFRAG_MIN_FRAGMENTATION',
    key: 'defragMinFragmentation',
    default: '0.45',
    parse: fraction(0, 1, true),
    doc: "a member is defragmented when its fragmentation, (dbSize − dbSizeInUse) / dbSize, is at least this (OpenShift's 45 %)",
  }),
  row({
    variable: 'ETCD_AGENT_DEFRAG_MIN_DB_SIZE_BYTES',
    key: 'defragMinDbSizeBytes',
    default: '104857600',
    parse: integer(0, Number.MAX_SAFE_INTEGER),
    doc: "and its database is at least this big (OpenShift's 100 MiB); under NOSPACE every member over its quota less the margin is defragmented whatever its size",
  }),
  row({
    variable: 'ETCD_AGENT_DEFRAG_COMPACT_RETAIN',
    key: 'defragCompactRetain',
    parse: retention,
    doc: 'compact the key history first, keeping the last N revisions (`10000`) or the last period (`90s`, `30m`, `6h`, `2d`); none: no compaction',
  }),
  row({
    variable: 'ETCD_AGENT_DEFRAG_QUOTA_MARGIN',
    key: 'defragQuotaMargin',
    default: '0.1',
    parse: fraction(0, 0.9),
    doc: "NOSPACE is disarmed only when every voter's database is below its quota by at least this fraction of the quota",
  }),
  // Backups (docs/operations/backups.md): where, when, how many, and the restore tool.
  row({
    variable: 'ETCD_AGENT_BACKUP_STORE',
    key: 'backupStore',
    parse: storeLocation,
    doc: 'where backups go: `s3://bucket/prefix` (options `?endpoint=https://host:port&region=…&path-style=true`; credentials from the AWS SDK chain: `AWS_ACCESS_KEY_ID`, shared files, web identity) or a directory (`file:///backups`, `/backups`); none: no backups',
  }),
  row({
    variable: 'ETCD_AGENT_BACKUP_STORE_TIMEOUT_SECONDS',
    key: 'backupStoreTimeoutSeconds',
    default: '60',
    parse: integer(1, 3600),
    doc: 'the longest one request to an S3 store may take, an 8 MiB part of an upload included, and the longest silence within a download; past it the call fails as `timeout`',
  }),
  row({
    variable: 'ETCD_AGENT_BACKUP_SNAPSHOT_IDLE_SECONDS',
    key: 'backupSnapshotIdleSeconds',
    default: '30',
    parse: integer(1, 3600),
    doc: "the longest a backup waits for the next bytes of the source member's snapshot while the store is ready for them; past it the backup fails as `timeout` naming the member, and releases the cluster lock (a frozen or cut-off member sends nothing and no error)",
  }),
  row({
    variable: 'ETCD_AGENT_BACKUP_SCHEDULE',
    key: 'backupSchedule',
    parse: cronSchedule,
    doc: 'when this agent takes a backup by itself: a cron expression in UTC (`0 */6 * * *`); every sidecar may have it, the cluster lock and the store make it one backup per time named',
  }),
  row({
    variable: 'ETCD_AGENT_BACKUP_VERIFY_SCHEDULE',
    key: 'backupVerifySchedule',
    parse: cronSchedule,
    doc: 'when this agent verifies the newest backup again (read back, hashes checked, restored into a scratch directory, opened); each backup is verified right after it is taken too',
  }),
  row({
    variable: 'ETCD_AGENT_BACKUP_KEEP_LAST',
    key: 'backupKeepLast',
    parse: optionalInteger(1, 100_000),
    doc: 'retention keeps the newest N backups (with `ETCD_AGENT_BACKUP_KEEP_FOR`, those younger too); none of the two: every backup is kept; the newest verified backup is never removed',
  }),
  row({
    variable: 'ETCD_AGENT_BACKUP_KEEP_FOR',
    key: 'backupKeepForSeconds',
    parse: durationSeconds,
    doc: 'retention keeps backups younger than this (`36h`, `14d`)',
  }),
  row({
    variable: 'ETCD_AGENT_ETCDUTL',
    key: 'etcdutl',
    parse: program,
    defaultDoc: '`etcdutl` on PATH, else `etcdctl`',
    doc: "etcd's snapshot restore tool, which verification and prepare's restore run: etcdutl (3.5 and later) or etcdctl (3.4)",
  }),
] as const;

/** The settings whose value is the path of a file the agent reads. */
export const FILE_SETTINGS: readonly string[] = (SETTINGS as readonly Setting[]).filter((s) => s.file).map((s) => s.variable);

/** `ETCD_AGENT_HEALTH_MAX_AGE_MS` → `--health-max-age-ms`. */
export function flagFor(variable: string): string {
  return `--${variable
    .replace(/^ETCD_AGENT_/, '')
    .toLowerCase()
    .replace(/_/g, '-')}`;
}

/** The default column of a setting in docs/configuration.md. */
function defaultColumn(s: Setting): string {
  return s.defaultDoc ?? (s.default === undefined ? 'none' : `\`${s.default}\``);
}

/** docs/configuration.md's table of settings (Markdown), rows sharing a meaning and default merged. */
export function configurationTable(): string {
  const lines = ['| variable | default | meaning |', '|---|---|---|'];
  const settings: readonly Setting[] = SETTINGS;
  for (let i = 0; i < settings.length;) {
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
