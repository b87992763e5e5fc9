/**
 * Configuration (docs/api.md §2): environment variables, each with a `--flag` twin
 * that wins, validated once at start-up into one frozen `Config`.
 */
import { hostNetworkSetting, resolveHostNetwork, startupAuthRefusal } from './host-network';
import { peerUrlFromTemplate } from '../proto/urls';
import { ConfigError, flagFor, type Setting, SETTINGS, settingsOptions } from './settings';
import type { CommandUsage } from '../lib/usage';

export { ConfigError, flagFor, LOG_LEVELS, type LogLevel } from './settings';

type Keyed = Extract<(typeof SETTINGS)[number], { key: string }>;
type ValueOf<R> = R extends Setting<string, infer T> ? T : never;
/** The settings whose parser always answers a value, and those that may be absent. */
type Fields = { [R in Keyed as undefined extends ValueOf<R> ? never : R['key']]: ValueOf<R> } & {
  [R in Keyed as undefined extends ValueOf<R> ? R['key'] : never]?: Exclude<ValueOf<R>, undefined>;
};

/** The agent's validated configuration: one field per keyed row of the settings table (settings.ts). */
export interface Config extends Fields {
  /** The agent shares the node's network namespace (`host-network.ts`): loopback vouches for nobody. */
  hostNetwork: boolean;
}

type Raw = (variable: string) => string | undefined;

/** `etcd-lifecycle-agent serve`: what its `--help` prints (usage.ts). */
export const SERVE_USAGE: CommandUsage = {
  name: 'serve',
  synopsis: '[flags]',
  summary: "run the agent in the foreground, beside this pod's etcd member",
  details: [
    'Configuration comes from ETCD_AGENT_* variables, each with a --flag twin (--flag VALUE or --flag=VALUE; a boolean flag alone means true). ' +
      'A bad value stops start-up with one line naming the variable, exit code 2. SIGTERM and SIGINT stop it cleanly within 5 s (exit 0).',
  ],
  options: settingsOptions(),
  notes: ['exit codes: 0 stopped by SIGTERM or SIGINT, 1 failed, 2 bad configuration'],
};

/** Every variable of docs/api.md §2, in table order; the flag is derived from the name. */
export const CONFIG_VARIABLES: readonly string[] = SETTINGS.map((s) => s.variable);

/** Variables whose flag may stand alone for `true` (`--host-network` also takes `=auto` or `=false`). */
const BOOLEAN_VARIABLES = new Set<string>(SETTINGS.filter((s: Setting) => s.boolean).map((s) => s.variable));
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

/** Parses every keyed setting in table order (the first bad one throws), then the rules across them. */
function buildConfig(raw: Raw, env: NodeJS.ProcessEnv): Config {
  const fields: Record<string, unknown> = {};
  for (const setting of SETTINGS as readonly Setting[]) {
    if (setting.key === undefined) continue;
    // Unset optional settings are present as undefined, as they always were.
    fields[setting.key] = setting.parse(raw(setting.variable) ?? setting.default, setting.variable, env);
  }
  const config = { ...fields, hostNetwork: false } as Config;
  if (config.localPeerUrl === undefined && config.peerUrlTemplate !== undefined) {
    config.localPeerUrl = peerUrlFromTemplate(config.peerUrlTemplate, config.memberName);
  }
  if (config.statusTimeoutMs >= config.healthMaxAgeMs) {
    // A status deadline at or above the max age would make one silent member turn
    // every observation late (`unknown`) instead of `degraded`.
    throw new ConfigError(
      'ETCD_AGENT_STATUS_TIMEOUT_MS',
      `${config.statusTimeoutMs} must be below ETCD_AGENT_HEALTH_MAX_AGE_MS (${config.healthMaxAgeMs})`,
    );
  }
  pairs(config);
  hostNetworkAuth(config, raw, env);
  return Object.freeze(config);
}

/** Sets `hostNetwork`, and refuses a host-network agent that any process on the node could command. */
function hostNetworkAuth(config: Config, raw: Raw, env: NodeJS.ProcessEnv): void {
  const variable = 'ETCD_AGENT_HOST_NETWORK';
  const value = raw(variable) ?? (SETTINGS.find((s) => s.variable === variable)?.default as string);
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
