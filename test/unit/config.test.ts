import * as fs from 'node:fs';
import os from 'node:os';
import * as path from 'node:path';
import { CONFIG_VARIABLES, Config, ConfigError, flagFor, loadConfig, parseFlags } from '../../agent/config/config';

// Files the *_FILE variables point at. Rows name them by key; paths exist only once beforeAll ran.
let tmp = '';
const FILES = ['ca.pem', 'cert.pem', 'key.pem', 'token', 'password'] as const;
type FileKey = (typeof FILES)[number] | 'missing' | 'dir';
const file = (key: FileKey): string => (key === 'missing' ? path.join(tmp, 'does-not-exist') : key === 'dir' ? tmp : path.join(tmp, key));

type Env = Record<string, string>;

/** Replaces `@name` placeholders in values with the temp file of that name. */
function resolve(env: Env): Env {
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v.startsWith('@') ? file(v.slice(1) as FileKey) : v]));
}

/** Member name set, so rows about other variables do not depend on the host name. */
const BASE: Env = { ETCD_AGENT_MEMBER_NAME: 'etcd-0' };

function load(env: Env, argv: string[] = []): Config {
  return loadConfig({ ...BASE, ...resolve(env) }, argv).config;
}

function configError(call: () => unknown): ConfigError {
  try {
    call();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw new Error(`expected a ConfigError, got ${String(err)}`);
  }
  throw new Error('expected a ConfigError, nothing was thrown');
}

/** The same settings as `--flag=value` arguments (POD_NAME has no flag and stays in the environment). */
function asFlags(env: Env): { env: Env; argv: string[] } {
  const argv = Object.entries(env)
    .filter(([k]) => k.startsWith('ETCD_AGENT_'))
    .map(([k, v]) => `${flagFor(k)}=${v}`);
  return { env: Object.fromEntries(Object.entries(env).filter(([k]) => !k.startsWith('ETCD_AGENT_'))), argv };
}

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-config-test-'));
  for (const name of FILES) fs.writeFileSync(path.join(tmp, name), `${name}\n`);
});

afterAll(() => {
  fs.rmSync(tmp, { recursive: true, force: true });
});

afterEach(() => {
  jest.restoreAllMocks();
});

describe('loadConfig defaults', () => {
  it('when nothing is set, then every variable takes the contract default', () => {
    jest.spyOn(os, 'hostname').mockReturnValue('etcd-host-7');

    const { config, rest } = loadConfig({});

    expect(rest).toEqual([]);
    expect(config).toEqual({
      listen: { host: '0.0.0.0', port: 3501 },
      endpoints: ['http://127.0.0.1:2379'],
      memberName: 'etcd-host-7',
      localEndpoint: 'http://127.0.0.1:2379',
      peerUrlTemplate: undefined,
      learnerFirst: true,
      healthMaxAgeMs: 1000,
      statusTimeoutMs: 500,
      timeoutSeconds: 30,
      keyPrefix: '/etcd-lifecycle-agent/',
      tokenFile: undefined,
      allowRemoteUnauthenticated: false,
      etcdCaFile: undefined,
      etcdCertFile: undefined,
      etcdKeyFile: undefined,
      etcdUsername: undefined,
      etcdPasswordFile: undefined,
      tlsCertFile: undefined,
      tlsKeyFile: undefined,
      tlsClientCaFile: undefined,
      logLevel: 'info',
      recoveryMinLossSeconds: 300,
      hostNetwork: false,
      hostNetworkAllowUnauthenticatedLoopback: false,
      defragSchedule: undefined,
      defragMinFragmentation: 0.45,
      defragMinDbSizeBytes: 104857600,
      defragCompactRetain: undefined,
      defragQuotaMargin: 0.1,
      backupStoreTimeoutSeconds: 60,
      backupSnapshotIdleSeconds: 30,
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('when a variable is empty or blank, then its default applies', () => {
    const config = load({ ETCD_AGENT_LISTEN: '', ETCD_AGENT_TIMEOUT_SECONDS: '   ', ETCD_AGENT_LOG_LEVEL: '' });

    expect(config).toMatchObject({ listen: { host: '0.0.0.0', port: 3501 }, timeoutSeconds: 30, logLevel: 'info' });
  });
});

// [environment, the part of the config it gives]; `@x` is the temp file x.
const GOOD: Array<[Env, Partial<Config>]> = [
  [{ ETCD_AGENT_LISTEN: '0.0.0.0:3501' }, { listen: { host: '0.0.0.0', port: 3501 } }],
  [{ ETCD_AGENT_LISTEN: '127.0.0.1:0' }, { listen: { host: '127.0.0.1', port: 0 } }],
  [{ ETCD_AGENT_LISTEN: '[::1]:0' }, { listen: { host: '::1', port: 0 } }],
  [{ ETCD_AGENT_LISTEN: ':8080' }, { listen: { host: '0.0.0.0', port: 8080 } }],
  [{ ETCD_AGENT_LISTEN: ' localhost:65535 ' }, { listen: { host: 'localhost', port: 65535 } }],
  [{ ETCD_AGENT_ENDPOINTS: 'http://10.0.0.1:2379' }, { endpoints: ['http://10.0.0.1:2379'] }],
  [
    { ETCD_AGENT_ENDPOINTS: 'http://etcd-0:2379, http://etcd-1:2379/,,HTTP://ETCD-2:2379' },
    { endpoints: ['http://etcd-0:2379', 'http://etcd-1:2379', 'http://etcd-2:2379'] },
  ],
  [
    { ETCD_AGENT_ENDPOINTS: 'http://etcd-headless.demo.svc.cluster.local:2379' },
    { endpoints: ['http://etcd-headless.demo.svc.cluster.local:2379'] },
  ],
  [
    { ETCD_AGENT_ENDPOINTS: 'https://etcd-0:2379', ETCD_AGENT_ETCD_CA_FILE: '@ca.pem' },
    { endpoints: ['https://etcd-0:2379'], etcdCaFile: '<ca.pem>' },
  ],
  [{ ETCD_AGENT_MEMBER_NAME: 'etcd-3' }, { memberName: 'etcd-3' }],
  [{ ETCD_AGENT_MEMBER_NAME: 'etcd-0.etcd-headless.demo' }, { memberName: 'etcd-0.etcd-headless.demo' }],
  [{ ETCD_AGENT_LOCAL_ENDPOINT: 'http://10.1.2.3:2379' }, { localEndpoint: 'http://10.1.2.3:2379' }],
  [
    { ETCD_AGENT_PEER_URL_TEMPLATE: 'http://{name}.etcd-headless.demo.svc.cluster.local:2380' },
    { peerUrlTemplate: 'http://{name}.etcd-headless.demo.svc.cluster.local:2380' },
  ],
  [{ ETCD_AGENT_PEER_URL_TEMPLATE: 'https://{fqdn}:2380' }, { peerUrlTemplate: 'https://{fqdn}:2380' }],
  // A port written out is a port, even the scheme's default one.
  [{ ETCD_AGENT_PEER_URL_TEMPLATE: 'https://{name}.peers:443' }, { peerUrlTemplate: 'https://{name}.peers:443' }],
  [{ ETCD_AGENT_LEARNER_FIRST: 'false' }, { learnerFirst: false }],
  [{ ETCD_AGENT_LEARNER_FIRST: 'FALSE' }, { learnerFirst: false }],
  [{ ETCD_AGENT_LEARNER_FIRST: '0' }, { learnerFirst: false }],
  [{ ETCD_AGENT_LEARNER_FIRST: 'no' }, { learnerFirst: false }],
  [{ ETCD_AGENT_LEARNER_FIRST: 'True' }, { learnerFirst: true }],
  [{ ETCD_AGENT_LEARNER_FIRST: '1' }, { learnerFirst: true }],
  [{ ETCD_AGENT_HEALTH_MAX_AGE_MS: '2000' }, { healthMaxAgeMs: 2000, statusTimeoutMs: 500 }],
  [{ ETCD_AGENT_HEALTH_MAX_AGE_MS: '60000' }, { healthMaxAgeMs: 60000 }],
  [{ ETCD_AGENT_HEALTH_MAX_AGE_MS: '501' }, { healthMaxAgeMs: 501 }],
  [{ ETCD_AGENT_STATUS_TIMEOUT_MS: '10' }, { statusTimeoutMs: 10 }],
  [{ ETCD_AGENT_STATUS_TIMEOUT_MS: '999' }, { statusTimeoutMs: 999, healthMaxAgeMs: 1000 }],
  [
    { ETCD_AGENT_HEALTH_MAX_AGE_MS: '50', ETCD_AGENT_STATUS_TIMEOUT_MS: '49' },
    { healthMaxAgeMs: 50, statusTimeoutMs: 49 },
  ],
  [{ ETCD_AGENT_TIMEOUT_SECONDS: '1' }, { timeoutSeconds: 1 }],
  [{ ETCD_AGENT_TIMEOUT_SECONDS: '60' }, { timeoutSeconds: 60 }],
  [{ ETCD_AGENT_KEY_PREFIX: '/agents/demo/' }, { keyPrefix: '/agents/demo/' }],
  [{ ETCD_AGENT_KEY_PREFIX: '/agents' }, { keyPrefix: '/agents/' }],
  [{ ETCD_AGENT_TOKEN_FILE: '@token' }, { tokenFile: '<token>' }],
  [{ ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED: 'true' }, { allowRemoteUnauthenticated: true }],
  [{ ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED: 'Yes' }, { allowRemoteUnauthenticated: true }],
  [{ ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED: 'false' }, { allowRemoteUnauthenticated: false }],
  [{ ETCD_AGENT_HOST_NETWORK: 'false' }, { hostNetwork: false }],
  [{ ETCD_AGENT_HOST_NETWORK: 'auto' }, { hostNetwork: false }],
  [
    { ETCD_AGENT_HOST_NETWORK: 'true', ETCD_AGENT_TOKEN_FILE: '@token' },
    { hostNetwork: true, tokenFile: '<token>' },
  ],
  // The downward API's addresses: equal only in a host-network pod (POD_IP and HOST_IP have no flags).
  [{ POD_IP: '10.0.0.5', HOST_IP: '10.0.0.5', ETCD_AGENT_TOKEN_FILE: '@token' }, { hostNetwork: true }],
  [{ POD_IP: '10.244.1.7', HOST_IP: '10.0.0.5' }, { hostNetwork: false }],
  [
    { ETCD_AGENT_HOST_NETWORK: 'yes', ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK: 'true' },
    { hostNetwork: true, hostNetworkAllowUnauthenticatedLoopback: true, tokenFile: undefined },
  ],
  [
    { ETCD_AGENT_HOST_NETWORK: 'true', ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED: 'true' },
    { hostNetwork: true, allowRemoteUnauthenticated: true },
  ],
  [{ ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK: 'false' }, { hostNetworkAllowUnauthenticatedLoopback: false }],
  [{ ETCD_AGENT_ETCD_CA_FILE: '@ca.pem' }, { etcdCaFile: '<ca.pem>' }],
  [
    { ETCD_AGENT_ETCD_CERT_FILE: '@cert.pem', ETCD_AGENT_ETCD_KEY_FILE: '@key.pem' },
    { etcdCertFile: '<cert.pem>', etcdKeyFile: '<key.pem>' },
  ],
  [
    { ETCD_AGENT_ETCD_USERNAME: 'agent', ETCD_AGENT_ETCD_PASSWORD_FILE: '@password' },
    { etcdUsername: 'agent', etcdPasswordFile: '<password>' },
  ],
  [
    { ETCD_AGENT_TLS_CERT_FILE: '@cert.pem', ETCD_AGENT_TLS_KEY_FILE: '@key.pem' },
    { tlsCertFile: '<cert.pem>', tlsKeyFile: '<key.pem>', tlsClientCaFile: undefined },
  ],
  [
    { ETCD_AGENT_TLS_CERT_FILE: '@cert.pem', ETCD_AGENT_TLS_KEY_FILE: '@key.pem', ETCD_AGENT_TLS_CLIENT_CA_FILE: '@ca.pem' },
    { tlsCertFile: '<cert.pem>', tlsKeyFile: '<key.pem>', tlsClientCaFile: '<ca.pem>' },
  ],
  [{ ETCD_AGENT_LOG_LEVEL: 'debug' }, { logLevel: 'debug' }],
  [{ ETCD_AGENT_LOG_LEVEL: 'WARN' }, { logLevel: 'warn' }],
  [{ ETCD_AGENT_LOG_LEVEL: 'error' }, { logLevel: 'error' }],
  [{ ETCD_AGENT_RECOVERY_MIN_LOSS_SECONDS: '5' }, { recoveryMinLossSeconds: 5 }],
  [{ ETCD_AGENT_LOCAL_PEER_URL: 'http://127.0.0.1:2380' }, { localPeerUrl: 'http://127.0.0.1:2380' }],
  [
    { ETCD_AGENT_START_NOTE_FILE: '/var/run/etcd-lifecycle-agent/etcd-start-note' },
    { startNoteFile: '/var/run/etcd-lifecycle-agent/etcd-start-note' },
  ],
  [
    { ETCD_AGENT_MEMBER_NAME: 'etcd-2', ETCD_AGENT_PEER_URL_TEMPLATE: 'http://{name}.etcd-headless:2380' },
    { localPeerUrl: 'http://etcd-2.etcd-headless:2380' },
  ],
  [{ ETCD_AGENT_DEFRAG_SCHEDULE: '0 3 * * sun' }, { defragSchedule: expect.objectContaining({ source: '0 3 * * sun' }) as never }],
  [{ ETCD_AGENT_DEFRAG_SCHEDULE: '*/30 * * * *' }, { defragSchedule: expect.objectContaining({ source: '*/30 * * * *' }) as never }],
  [{ ETCD_AGENT_DEFRAG_MIN_FRAGMENTATION: '0.2' }, { defragMinFragmentation: 0.2 }],
  [{ ETCD_AGENT_DEFRAG_MIN_FRAGMENTATION: '1' }, { defragMinFragmentation: 1 }],
  [{ ETCD_AGENT_DEFRAG_MIN_DB_SIZE_BYTES: '0' }, { defragMinDbSizeBytes: 0 }],
  [{ ETCD_AGENT_DEFRAG_COMPACT_RETAIN: '10000' }, { defragCompactRetain: { retainRevisions: 10000 } }],
  [
    { ETCD_AGENT_BACKUP_STORE: 's3://etcd-backups/prod/a?endpoint=http://minio:9000' },
    { backupStore: { kind: 's3', bucket: 'etcd-backups', prefix: 'prod/a/', endpoint: 'http://minio:9000', pathStyle: true } },
  ],
  [{ ETCD_AGENT_BACKUP_STORE: 'file:///backups/etcd' }, { backupStore: { kind: 'dir', path: '/backups/etcd' } }],
  [{ ETCD_AGENT_BACKUP_SCHEDULE: '0 */6 * * *' }, { backupSchedule: expect.objectContaining({ source: '0 */6 * * *' }) as never }],
  [{ ETCD_AGENT_BACKUP_VERIFY_SCHEDULE: '0 4 * * *' }, { backupVerifySchedule: expect.objectContaining({ source: '0 4 * * *' }) as never }],
  [{ ETCD_AGENT_BACKUP_KEEP_LAST: '14' }, { backupKeepLast: 14 }],
  [{ ETCD_AGENT_BACKUP_STORE_TIMEOUT_SECONDS: '5' }, { backupStoreTimeoutSeconds: 5 }],
  [{ ETCD_AGENT_BACKUP_SNAPSHOT_IDLE_SECONDS: '3' }, { backupSnapshotIdleSeconds: 3 }],
  [{ ETCD_AGENT_BACKUP_KEEP_FOR: '14d' }, { backupKeepForSeconds: 14 * 86_400 }],
  [{ ETCD_AGENT_ETCDUTL: '/usr/local/bin/etcdutl' }, { etcdutl: '/usr/local/bin/etcdutl' }],
  [{ ETCD_AGENT_DEFRAG_COMPACT_RETAIN: '6h' }, { defragCompactRetain: { retainSeconds: 21600 } }],
  [{ ETCD_AGENT_DEFRAG_QUOTA_MARGIN: '0' }, { defragQuotaMargin: 0 }],
  [{ ETCD_AGENT_DEFRAG_QUOTA_MARGIN: '0.25' }, { defragQuotaMargin: 0.25 }],
];

/** `<x>` in an expected value is the temp file x. */
function expected(partial: Partial<Config>): Partial<Config> {
  return Object.fromEntries(
    Object.entries(partial).map(([k, v]) => [k, typeof v === 'string' && /^<.+>$/.test(v) ? file(v.slice(1, -1) as FileKey) : v]),
  ) as Partial<Config>;
}

describe('loadConfig good values', () => {
  it.each(GOOD)('when the environment is %j, then the config holds %j', (env, want) => {
    expect(load(env)).toMatchObject(expected(want));
  });

  it.each(GOOD)('when the flags say %j, then the config holds %j', (env, want) => {
    const { env: other, argv } = asFlags(env);

    const { config, rest } = loadConfig(
      { ...BASE, ...other },
      argv.map((a) => (a.includes('=@') ? resolveFlag(a) : a)),
    );

    expect(rest).toEqual([]);
    expect(config).toMatchObject(expected(want));
  });

  it('when the rows are counted, then every variable of docs/api.md §2 has a good value', () => {
    const covered = new Set(GOOD.flatMap(([env]) => Object.keys(env)));

    expect(CONFIG_VARIABLES.filter((v) => !covered.has(v))).toEqual([]);
  });
});

function resolveFlag(arg: string): string {
  const eq = arg.indexOf('=');
  return `${arg.slice(0, eq)}=${file(arg.slice(eq + 2) as FileKey)}`;
}

// [environment, the variable the error names, a phrase of its message]
const BAD: Array<[Env, string, string]> = [
  [{ ETCD_AGENT_LISTEN: '3501' }, 'ETCD_AGENT_LISTEN', 'is not host:port'],
  [{ ETCD_AGENT_LISTEN: 'host:99999' }, 'ETCD_AGENT_LISTEN', 'is not host:port'],
  [{ ETCD_AGENT_LISTEN: 'host:' }, 'ETCD_AGENT_LISTEN', 'is not host:port'],
  [{ ETCD_AGENT_LISTEN: 'host:35a1' }, 'ETCD_AGENT_LISTEN', 'is not host:port'],
  [{ ETCD_AGENT_LISTEN: '::1:3501' }, 'ETCD_AGENT_LISTEN', 'is not host:port'],
  [{ ETCD_AGENT_LISTEN: '[::1]' }, 'ETCD_AGENT_LISTEN', 'is not host:port'],
  [{ ETCD_AGENT_ENDPOINTS: 'etcd-0:2379' }, 'ETCD_AGENT_ENDPOINTS', 'must be an http or https URL'],
  [{ ETCD_AGENT_ENDPOINTS: 'http://etcd-0:2379,ftp://etcd-1:21' }, 'ETCD_AGENT_ENDPOINTS', 'must be an http or https URL'],
  [{ ETCD_AGENT_ENDPOINTS: 'not a url' }, 'ETCD_AGENT_ENDPOINTS', 'is not a URL'],
  [{ ETCD_AGENT_ENDPOINTS: 'http://etcd-0:2379/v3' }, 'ETCD_AGENT_ENDPOINTS', 'no user, path, query or fragment'],
  [{ ETCD_AGENT_ENDPOINTS: 'http://root:pw@etcd-0:2379' }, 'ETCD_AGENT_ENDPOINTS', 'no user, path, query or fragment'],
  [{ ETCD_AGENT_ENDPOINTS: ' , ' }, 'ETCD_AGENT_ENDPOINTS', 'needs at least one URL'],
  [{ ETCD_AGENT_ENDPOINTS: 'https://etcd-0:2379' }, 'ETCD_AGENT_ETCD_CA_FILE', 'is required for the https endpoint https://etcd-0:2379'],
  [{ ETCD_AGENT_MEMBER_NAME: 'Etcd_0' }, 'ETCD_AGENT_MEMBER_NAME', '"Etcd_0" is not a DNS-1123 subdomain'],
  [{ ETCD_AGENT_MEMBER_NAME: 'etcd-0-' }, 'ETCD_AGENT_MEMBER_NAME', 'is not a DNS-1123 subdomain'],
  [{ ETCD_AGENT_MEMBER_NAME: 'etcd..0' }, 'ETCD_AGENT_MEMBER_NAME', 'is not a DNS-1123 subdomain'],
  [{ ETCD_AGENT_MEMBER_NAME: 'a'.repeat(254) }, 'ETCD_AGENT_MEMBER_NAME', 'is not a DNS-1123 subdomain'],
  [{ ETCD_AGENT_LOCAL_ENDPOINT: 'localhost:2379' }, 'ETCD_AGENT_LOCAL_ENDPOINT', 'must be an http or https URL'],
  [{ ETCD_AGENT_LOCAL_ENDPOINT: 'http://127.0.0.1:2379/health' }, 'ETCD_AGENT_LOCAL_ENDPOINT', 'no user, path, query or fragment'],
  [{ ETCD_AGENT_LOCAL_ENDPOINT: 'https://127.0.0.1:2379' }, 'ETCD_AGENT_ETCD_CA_FILE', 'is required for the https endpoint'],
  [{ ETCD_AGENT_PEER_URL_TEMPLATE: 'http://etcd-0.etcd-headless:2380' }, 'ETCD_AGENT_PEER_URL_TEMPLATE', 'neither {name} nor {fqdn}'],
  [{ ETCD_AGENT_PEER_URL_TEMPLATE: 'http://{name}.etcd-headless' }, 'ETCD_AGENT_PEER_URL_TEMPLATE', 'port'],
  [{ ETCD_AGENT_PEER_URL_TEMPLATE: 'ftp://{name}:2380' }, 'ETCD_AGENT_PEER_URL_TEMPLATE', 'http or https'],
  [{ ETCD_AGENT_PEER_URL_TEMPLATE: '{name}:2380' }, 'ETCD_AGENT_PEER_URL_TEMPLATE', '"{name}:2380"'],
  // Every peer URL it made would be refused at join time (docs/api.md §4: nothing but scheme, host and port).
  [{ ETCD_AGENT_PEER_URL_TEMPLATE: 'http://{name}:2380/peers' }, 'ETCD_AGENT_PEER_URL_TEMPLATE', 'path'],
  [{ ETCD_AGENT_PEER_URL_TEMPLATE: 'http://{name}:99999' }, 'ETCD_AGENT_PEER_URL_TEMPLATE', 'port'],
  [{ ETCD_AGENT_LEARNER_FIRST: 'maybe' }, 'ETCD_AGENT_LEARNER_FIRST', '"maybe" is not a boolean'],
  [{ ETCD_AGENT_LEARNER_FIRST: 'on' }, 'ETCD_AGENT_LEARNER_FIRST', 'is not a boolean'],
  [{ ETCD_AGENT_LEARNER_FIRST: '2' }, 'ETCD_AGENT_LEARNER_FIRST', 'is not a boolean'],
  [{ ETCD_AGENT_HEALTH_MAX_AGE_MS: '49' }, 'ETCD_AGENT_HEALTH_MAX_AGE_MS', 'must be a whole number from 50 to 60000'],
  [{ ETCD_AGENT_HEALTH_MAX_AGE_MS: '60001' }, 'ETCD_AGENT_HEALTH_MAX_AGE_MS', 'from 50 to 60000'],
  [{ ETCD_AGENT_HEALTH_MAX_AGE_MS: '1.5' }, 'ETCD_AGENT_HEALTH_MAX_AGE_MS', 'whole number'],
  [{ ETCD_AGENT_HEALTH_MAX_AGE_MS: '1e3' }, 'ETCD_AGENT_HEALTH_MAX_AGE_MS', 'whole number'],
  [{ ETCD_AGENT_HEALTH_MAX_AGE_MS: '-1000' }, 'ETCD_AGENT_HEALTH_MAX_AGE_MS', 'whole number'],
  [{ ETCD_AGENT_HEALTH_MAX_AGE_MS: 'abc' }, 'ETCD_AGENT_HEALTH_MAX_AGE_MS', 'whole number'],
  // The default status timeout (500) is not below a 400 ms max age.
  [{ ETCD_AGENT_HEALTH_MAX_AGE_MS: '400' }, 'ETCD_AGENT_STATUS_TIMEOUT_MS', '500 must be below ETCD_AGENT_HEALTH_MAX_AGE_MS (400)'],
  [{ ETCD_AGENT_STATUS_TIMEOUT_MS: '1000' }, 'ETCD_AGENT_STATUS_TIMEOUT_MS', '1000 must be below ETCD_AGENT_HEALTH_MAX_AGE_MS (1000)'],
  [{ ETCD_AGENT_STATUS_TIMEOUT_MS: '9' }, 'ETCD_AGENT_STATUS_TIMEOUT_MS', 'from 10 to 60000'],
  [{ ETCD_AGENT_STATUS_TIMEOUT_MS: '0.5' }, 'ETCD_AGENT_STATUS_TIMEOUT_MS', 'whole number'],
  [{ ETCD_AGENT_TIMEOUT_SECONDS: '0' }, 'ETCD_AGENT_TIMEOUT_SECONDS', 'must be a whole number from 1 to 60'],
  [{ ETCD_AGENT_TIMEOUT_SECONDS: '61' }, 'ETCD_AGENT_TIMEOUT_SECONDS', 'from 1 to 60'],
  [{ ETCD_AGENT_TIMEOUT_SECONDS: '30s' }, 'ETCD_AGENT_TIMEOUT_SECONDS', 'whole number'],
  [{ ETCD_AGENT_KEY_PREFIX: 'etcd-lifecycle-agent/' }, 'ETCD_AGENT_KEY_PREFIX', '"etcd-lifecycle-agent/" must start with /'],
  [{ ETCD_AGENT_TOKEN_FILE: '@missing' }, 'ETCD_AGENT_TOKEN_FILE', 'cannot read file'],
  [{ ETCD_AGENT_TOKEN_FILE: '@dir' }, 'ETCD_AGENT_TOKEN_FILE', 'cannot read file'],
  [{ ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED: 'sure' }, 'ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED', 'is not a boolean'],
  [{ ETCD_AGENT_HOST_NETWORK: 'node' }, 'ETCD_AGENT_HOST_NETWORK', '"node" is not true, false or auto'],
  // The host's network namespace without a token: any process on the node could change membership.
  [
    { ETCD_AGENT_HOST_NETWORK: 'true' },
    'ETCD_AGENT_TOKEN_FILE',
    "is required in the node's network namespace (ETCD_AGENT_HOST_NETWORK=true)",
  ],
  [
    { POD_IP: '10.0.0.5', HOST_IP: '10.0.0.5' },
    'ETCD_AGENT_TOKEN_FILE',
    "is required in the node's network namespace (POD_IP equals HOST_IP (10.0.0.5))",
  ],
  [
    { ETCD_AGENT_HOST_NETWORK: 'false', POD_IP: '10.0.0.5', HOST_IP: '10.0.0.5' },
    'ETCD_AGENT_HOST_NETWORK',
    "is false, but POD_IP equals HOST_IP (10.0.0.5): the pod uses the node's network namespace",
  ],
  [
    { ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK: 'sure' },
    'ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK',
    'is not a boolean',
  ],
  [{ ETCD_AGENT_ETCD_CA_FILE: '@missing' }, 'ETCD_AGENT_ETCD_CA_FILE', 'cannot read file'],
  [{ ETCD_AGENT_ETCD_CERT_FILE: '@missing', ETCD_AGENT_ETCD_KEY_FILE: '@key.pem' }, 'ETCD_AGENT_ETCD_CERT_FILE', 'cannot read file'],
  [{ ETCD_AGENT_ETCD_CERT_FILE: '@cert.pem' }, 'ETCD_AGENT_ETCD_KEY_FILE', 'must be set together with ETCD_AGENT_ETCD_CERT_FILE'],
  [{ ETCD_AGENT_ETCD_KEY_FILE: '@key.pem' }, 'ETCD_AGENT_ETCD_CERT_FILE', 'must be set together with ETCD_AGENT_ETCD_KEY_FILE'],
  [{ ETCD_AGENT_ETCD_KEY_FILE: '@dir', ETCD_AGENT_ETCD_CERT_FILE: '@cert.pem' }, 'ETCD_AGENT_ETCD_KEY_FILE', 'cannot read file'],
  [{ ETCD_AGENT_ETCD_USERNAME: 'agent' }, 'ETCD_AGENT_ETCD_PASSWORD_FILE', 'must be set together with ETCD_AGENT_ETCD_USERNAME'],
  [{ ETCD_AGENT_ETCD_PASSWORD_FILE: '@password' }, 'ETCD_AGENT_ETCD_USERNAME', 'must be set together with ETCD_AGENT_ETCD_PASSWORD_FILE'],
  [{ ETCD_AGENT_ETCD_USERNAME: 'agent', ETCD_AGENT_ETCD_PASSWORD_FILE: '@missing' }, 'ETCD_AGENT_ETCD_PASSWORD_FILE', 'cannot read file'],
  [{ ETCD_AGENT_TLS_CERT_FILE: '@cert.pem' }, 'ETCD_AGENT_TLS_KEY_FILE', 'must be set together with ETCD_AGENT_TLS_CERT_FILE'],
  [{ ETCD_AGENT_TLS_KEY_FILE: '@key.pem' }, 'ETCD_AGENT_TLS_CERT_FILE', 'must be set together with ETCD_AGENT_TLS_KEY_FILE'],
  [{ ETCD_AGENT_TLS_CERT_FILE: '@missing', ETCD_AGENT_TLS_KEY_FILE: '@key.pem' }, 'ETCD_AGENT_TLS_CERT_FILE', 'cannot read file'],
  [{ ETCD_AGENT_TLS_CLIENT_CA_FILE: '@ca.pem' }, 'ETCD_AGENT_TLS_CLIENT_CA_FILE', 'needs ETCD_AGENT_TLS_CERT_FILE'],
  [
    { ETCD_AGENT_TLS_CERT_FILE: '@cert.pem', ETCD_AGENT_TLS_KEY_FILE: '@key.pem', ETCD_AGENT_TLS_CLIENT_CA_FILE: '@missing' },
    'ETCD_AGENT_TLS_CLIENT_CA_FILE',
    'cannot read file',
  ],
  [{ ETCD_AGENT_LOG_LEVEL: 'trace' }, 'ETCD_AGENT_LOG_LEVEL', '"trace" is not one of error, warn, info, http, verbose, debug, silly'],
  [{ ETCD_AGENT_LOG_LEVEL: 'loud' }, 'ETCD_AGENT_LOG_LEVEL', 'is not one of'],
  [{ ETCD_AGENT_LOCAL_PEER_URL: 'http://127.0.0.1' }, 'ETCD_AGENT_LOCAL_PEER_URL', 'is not a peer URL'],
  [{ ETCD_AGENT_RECOVERY_MIN_LOSS_SECONDS: '0' }, 'ETCD_AGENT_RECOVERY_MIN_LOSS_SECONDS', 'must be a whole number from 1 to 86400'],
  [{ ETCD_AGENT_START_NOTE_FILE: 'etcd-start-note' }, 'ETCD_AGENT_START_NOTE_FILE', 'must be an absolute path'],
  [{ ETCD_AGENT_DEFRAG_SCHEDULE: '0 3 * *' }, 'ETCD_AGENT_DEFRAG_SCHEDULE', 'not a cron schedule: "0 3 * *" has 4 fields'],
  [{ ETCD_AGENT_DEFRAG_SCHEDULE: '0 0 30 2 *' }, 'ETCD_AGENT_DEFRAG_SCHEDULE', 'never fires'],
  [{ ETCD_AGENT_DEFRAG_MIN_FRAGMENTATION: '0' }, 'ETCD_AGENT_DEFRAG_MIN_FRAGMENTATION', 'must be a number above 0 and at most 1'],
  [{ ETCD_AGENT_DEFRAG_MIN_FRAGMENTATION: '45%' }, 'ETCD_AGENT_DEFRAG_MIN_FRAGMENTATION', 'must be a number above 0'],
  [{ ETCD_AGENT_DEFRAG_MIN_DB_SIZE_BYTES: '100MB' }, 'ETCD_AGENT_DEFRAG_MIN_DB_SIZE_BYTES', 'must be a whole number'],
  [{ ETCD_AGENT_DEFRAG_COMPACT_RETAIN: '0' }, 'ETCD_AGENT_DEFRAG_COMPACT_RETAIN', 'is neither a number of revisions'],
  [{ ETCD_AGENT_BACKUP_STORE: 'gs://bucket' }, 'ETCD_AGENT_BACKUP_STORE', 'must start with s3:// or file://'],
  [{ ETCD_AGENT_BACKUP_STORE: 's3://AKIA:secret@bucket' }, 'ETCD_AGENT_BACKUP_STORE', 'must not hold credentials'],
  [{ ETCD_AGENT_BACKUP_STORE: 's3://bkt/p?acl=public' }, 'ETCD_AGENT_BACKUP_STORE', 'unknown option "acl"'],
  [{ ETCD_AGENT_BACKUP_SCHEDULE: 'hourly' }, 'ETCD_AGENT_BACKUP_SCHEDULE', 'not a cron schedule'],
  [{ ETCD_AGENT_BACKUP_VERIFY_SCHEDULE: '0 0 30 2 *' }, 'ETCD_AGENT_BACKUP_VERIFY_SCHEDULE', 'never fires'],
  [{ ETCD_AGENT_BACKUP_STORE_TIMEOUT_SECONDS: '0' }, 'ETCD_AGENT_BACKUP_STORE_TIMEOUT_SECONDS', 'must be a whole number from 1 to 3600'],
  [{ ETCD_AGENT_BACKUP_SNAPSHOT_IDLE_SECONDS: '0' }, 'ETCD_AGENT_BACKUP_SNAPSHOT_IDLE_SECONDS', 'must be a whole number from 1 to 3600'],
  [{ ETCD_AGENT_BACKUP_KEEP_LAST: '0' }, 'ETCD_AGENT_BACKUP_KEEP_LAST', 'must be a whole number from 1 to 100000'],
  [{ ETCD_AGENT_BACKUP_KEEP_FOR: '2w' }, 'ETCD_AGENT_BACKUP_KEEP_FOR', 'is not a duration'],
  [{ ETCD_AGENT_ETCDUTL: 'bin/etcdutl' }, 'ETCD_AGENT_ETCDUTL', 'must be an absolute path or a program name on PATH'],
  [{ ETCD_AGENT_DEFRAG_COMPACT_RETAIN: '1w' }, 'ETCD_AGENT_DEFRAG_COMPACT_RETAIN', 'is neither a number of revisions'],
  [{ ETCD_AGENT_DEFRAG_QUOTA_MARGIN: '0.95' }, 'ETCD_AGENT_DEFRAG_QUOTA_MARGIN', 'must be a number from 0 to 0.9'],
];

describe('loadConfig bad values', () => {
  it.each(BAD)('when the environment is %j, then a ConfigError names %s', (env, variable, phrase) => {
    const error = configError(() => load(env));

    expect(error.variable).toBe(variable);
    expect(error.name).toBe('ConfigError');
    expect(error.message.startsWith(`${variable}: `)).toBe(true);
    expect(error.message).toContain(phrase);
  });

  it.each(BAD)('when the flags say %j, then a ConfigError names %s too', (env, variable, phrase) => {
    const { env: rest, argv } = asFlags(resolve(env));

    const error = configError(() => loadConfig({ ...BASE, ...rest }, argv));

    expect(error.variable).toBe(variable);
    expect(error.message).toContain(phrase);
  });

  it('when the rows are counted, then every variable of docs/api.md §2 is named by some error', () => {
    const named = new Set(BAD.map(([, variable]) => variable));

    expect(CONFIG_VARIABLES.filter((v) => !named.has(v))).toEqual([]);
  });
});

describe('member name sources', () => {
  it.each<[string, string, Env]>([
    ['ETCD_AGENT_MEMBER_NAME and POD_NAME are set', 'etcd-1', { ETCD_AGENT_MEMBER_NAME: 'etcd-1', POD_NAME: 'etcd-2' }],
    ['only POD_NAME is set', 'etcd-2', { POD_NAME: 'etcd-2' }],
    ['POD_NAME is set with spaces', 'etcd-2', { POD_NAME: ' etcd-2 ' }],
    ['neither is set', 'etcd-host-7', {}],
    ['ETCD_AGENT_MEMBER_NAME is blank', 'etcd-2', { ETCD_AGENT_MEMBER_NAME: ' ', POD_NAME: 'etcd-2' }],
    ['POD_NAME is empty', 'etcd-host-7', { POD_NAME: '' }],
  ])('when %s, then the member name is %s', (_when, name, env) => {
    jest.spyOn(os, 'hostname').mockReturnValue('etcd-host-7');

    expect(loadConfig(env).config.memberName).toBe(name);
  });

  it('when the host name is upper case, then the member name is its lower-case form', () => {
    jest.spyOn(os, 'hostname').mockReturnValue('ETCD-Host-7');

    expect(loadConfig({}).config.memberName).toBe('etcd-host-7');
  });

  it('when --member-name is given, then it wins over ETCD_AGENT_MEMBER_NAME and POD_NAME', () => {
    const { config } = loadConfig({ ETCD_AGENT_MEMBER_NAME: 'etcd-1', POD_NAME: 'etcd-2' }, ['--member-name', 'etcd-9']);

    expect(config.memberName).toBe('etcd-9');
  });

  it.each<[string, Env]>([
    ['POD_NAME is not a DNS name', { POD_NAME: 'Etcd_0' }],
    ['the host name is not a DNS name', {}],
  ])('when %s, then the error names ETCD_AGENT_MEMBER_NAME', (_when, env) => {
    jest.spyOn(os, 'hostname').mockReturnValue('Build_Host');

    const error = configError(() => loadConfig(env));

    expect(error.variable).toBe('ETCD_AGENT_MEMBER_NAME');
  });
});

describe('flags', () => {
  it.each<[string, Env, string[], Partial<Config>]>([
    [
      '--listen VALUE beats the environment',
      { ETCD_AGENT_LISTEN: '0.0.0.0:3501' },
      ['--listen', '127.0.0.1:0'],
      { listen: { host: '127.0.0.1', port: 0 } },
    ],
    [
      '--listen=VALUE beats the environment',
      { ETCD_AGENT_LISTEN: '0.0.0.0:3501' },
      ['--listen=127.0.0.1:4000'],
      { listen: { host: '127.0.0.1', port: 4000 } },
    ],
    [
      '--health-max-age-ms=VALUE beats the environment',
      { ETCD_AGENT_HEALTH_MAX_AGE_MS: '5000' },
      ['--health-max-age-ms=2000'],
      { healthMaxAgeMs: 2000 },
    ],
    [
      'a bare --learner-first beats LEARNER_FIRST=false',
      { ETCD_AGENT_LEARNER_FIRST: 'false' },
      ['--learner-first'],
      { learnerFirst: true },
    ],
    ['--learner-first false takes the value', {}, ['--learner-first', 'false'], { learnerFirst: false }],
    [
      'a bare --allow-remote-unauthenticated before another flag',
      {},
      ['--allow-remote-unauthenticated', '--timeout-seconds', '5'],
      { allowRemoteUnauthenticated: true, timeoutSeconds: 5 },
    ],
    [
      '--endpoints VALUE beats the environment',
      { ETCD_AGENT_ENDPOINTS: 'http://a:2379' },
      ['--endpoints', 'http://b:2379,http://c:2379'],
      { endpoints: ['http://b:2379', 'http://c:2379'] },
    ],
    ['--log-level=debug beats the environment', { ETCD_AGENT_LOG_LEVEL: 'error' }, ['--log-level=debug'], { logLevel: 'debug' }],
  ])('when %s, then the flag wins', (_when, env, argv, want) => {
    const { config, rest } = loadConfig({ ...BASE, ...env }, argv);

    expect(rest).toEqual([]);
    expect(config).toMatchObject(want);
  });

  it('when a flag has a bad value and the environment a good one, then the error names the variable of the flag', () => {
    const error = configError(() => loadConfig({ ...BASE, ETCD_AGENT_TIMEOUT_SECONDS: '10' }, ['--timeout-seconds=61']));

    expect(error.variable).toBe('ETCD_AGENT_TIMEOUT_SECONDS');
  });

  it.each([['--listen'], ['--health-max-age-ms']])('when %s ends argv without a value, then it is a ConfigError', (flag) => {
    const error = configError(() => loadConfig(BASE, [flag]));

    expect(error.message).toBe(`${error.variable}: ${flag} needs a value`);
    expect(flagFor(error.variable)).toBe(flag);
  });

  it('when argv has arguments that are no configuration flag, then they are returned in order', () => {
    expect(parseFlags(['join', '--listen', ':1', 'etcd-3', '--wait', '--peer-url=http://x:2380'])).toEqual({
      flags: new Map([['ETCD_AGENT_LISTEN', ':1']]),
      rest: ['join', 'etcd-3', '--wait', '--peer-url=http://x:2380'],
    });
  });

  it.each<[string, string]>([
    ['ETCD_AGENT_LISTEN', '--listen'],
    ['ETCD_AGENT_MEMBER_NAME', '--member-name'],
    ['ETCD_AGENT_HEALTH_MAX_AGE_MS', '--health-max-age-ms'],
    ['ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED', '--allow-remote-unauthenticated'],
    ['ETCD_AGENT_ETCD_CA_FILE', '--etcd-ca-file'],
    ['ETCD_AGENT_TLS_CLIENT_CA_FILE', '--tls-client-ca-file'],
  ])('when the variable is %s, then its flag twin is %s', (variable, flag) => {
    expect(flagFor(variable)).toBe(flag);
  });
});
