/**
 * The commands of the command line, in one table: each command's usage (declared beside the code
 * that parses its arguments, usage.ts) and how it runs. `runMain` dispatches argv to one of them,
 * and answers `--help` / `-h` for every command from its usage before the command runs, so a new
 * command gets its help, its line in the overview and its help test (test/unit/command-help.test.ts,
 * test/integration/cli.test.ts) by being one row here. Wiring only: what a command does is its own
 * module's; the heavy ones (the agent, prepare, kube-inject's YAML) are loaded when run.
 */
import { ConfigError, loadConfig, SERVE_USAGE } from '../config/config';
import { runCommand } from './commands';
import { CLIENT_COMMANDS, clientUsage } from './client-commands';
import { KUBE_INJECT_USAGE } from './kube-inject-options';
import { tlsFilesProblem } from '../etcd/credentials';
import { readSecureContext, tlsFilesOf } from '../server/tls';
import { ARGV, loadPrepareOptions, PREPARE_USAGE } from '../prepare/options';
import { PROGRAM, renderOverview, renderUsage, renderUsageError, type CommandUsage, wantsHelp } from '../lib/usage';

/** Where a command writes; main.ts passes the process's streams. */
export interface MainIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  isTTY: boolean;
}

/** One command: how it is used, and how it runs (resolves to its exit code). */
export interface CommandEntry {
  usage: CommandUsage;
  run: (argv: string[], io: MainIo) => Promise<number>;
}

/** Every command, in the order the overview lists them. */
export const COMMANDS: readonly CommandEntry[] = [
  { usage: SERVE_USAGE, run: serve },
  { usage: PREPARE_USAGE, run: prepare },
  { usage: KUBE_INJECT_USAGE, run: async (argv, io) => (await import('./kube-inject-command')).runKubeInject(argv, io) },
  ...CLIENT_COMMANDS.map((command) => ({
    usage: clientUsage(command),
    run: (argv: string[], io: MainIo) =>
      command === 'backup' && argv.includes('--to')
        ? import('./backup-to').then((m) => m.runBackupTo(argv, io))
        : runCommand(command, argv, io),
  })),
];

/**
 * Runs the command `argv` names; resolves to the exit code. `--help`/`-h` print that command's usage
 * (exit 0); no command prints the overview (exit 2), `help`, `--help` or `-h` print it (exit 0), and
 * `help COMMAND` that command's usage.
 */
export async function runMain(argv: string[], io: MainIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    const asked = name === 'help' && rest[0] !== undefined ? find(rest[0]) : undefined;
    if (name === 'help' && rest[0] !== undefined && asked === undefined) return unknown(rest[0], io);
    io.stdout(asked === undefined ? renderOverview(COMMANDS.map((c) => c.usage)) : renderUsage(asked.usage));
    return name === undefined ? 2 : 0;
  }
  const command = find(name);
  if (command === undefined) return unknown(name, io);
  if (wantsHelp(rest)) {
    io.stdout(renderUsage(command.usage));
    return 0;
  }
  return command.run(rest, io);
}

function find(name: string): CommandEntry | undefined {
  return COMMANDS.find((c) => c.usage.name === name);
}

function unknown(name: string, io: MainIo): number {
  io.stderr(`${PROGRAM}: unknown command ${name}\n${renderOverview(COMMANDS.map((c) => c.usage))}`);
  return 2;
}

/** `serve`: the agent in the foreground until SIGTERM or SIGINT (exit 0), a bad value exit 2. */
async function serve(argv: string[], io: MainIo): Promise<number> {
  let loaded;
  try {
    loaded = loadConfig(process.env, argv);
  } catch (err) {
    if (err instanceof ConfigError) return badConfig('serve', err.message, io);
    throw err;
  }
  if (loaded.rest.length > 0) {
    io.stderr(renderUsageError(SERVE_USAGE, `unknown argument ${loaded.rest[0]}`));
    return 2;
  }
  const { config } = loaded;
  // With prepare's data directory and flags file (kube-inject gives the sidecar both), the agent can
  // restart and prepare its pod's etcd again: the recovery's act and a survivor's rejoin.
  let prepareOptions;
  if ((process.env.ETCD_AGENT_DATA_DIR ?? '').trim() !== '') {
    try {
      prepareOptions = loadPrepareOptions(process.env, [], true);
    } catch (err) {
      if (err instanceof ConfigError) return badConfig('serve', err.message, io);
      throw err;
    }
  }
  if (config.etcdCaFile !== undefined) {
    // Read once here so that files that do not load stop start-up as a bad value does (exit 2);
    // later rotations that do not load keep the previous credentials instead (etcd/credentials.ts).
    const problem = tlsFilesProblem({ caFile: config.etcdCaFile, certFile: config.etcdCertFile, keyFile: config.etcdKeyFile });
    if (problem !== undefined) return badConfig('serve', `ETCD_AGENT_ETCD_CA_FILE: the etcd TLS files do not load: ${problem}`, io);
  }
  const agentTls = tlsFilesOf(config);
  if (agentTls !== undefined) {
    // The same for the agent's own HTTPS files: listening on them would fail with a stack trace.
    try {
      readSecureContext(agentTls);
    } catch (err) {
      const why = (err instanceof Error ? err.message : String(err)).split('\n')[0];
      return badConfig('serve', `ETCD_AGENT_TLS_CERT_FILE: the agent's TLS files do not load: ${why}`, io);
    }
  }
  // Signals are taken from the start: a SIGTERM while the agent is still starting
  // (Kubernetes may send one at any time) stops it cleanly once it is up.
  // `on`, not `once`: a second signal during shutdown must meet the guard below,
  // not Node's default action (death by signal instead of exit 0).
  let signalled: string | undefined;
  let onSignal = (signal: string): void => {
    signalled ??= signal;
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  // Loaded here, not at the top: a client command (run by kbagent every few seconds) then starts
  // without loading express, etcd3 and gRPC, in a third of the time.
  const [{ startAgent }, { createLogger }] = await Promise.all([import('../agent'), import('../observability/logger')]);
  const logger = createLogger({ level: config.logLevel });
  const agent = await startAgent(config, { logger, prepare: prepareOptions });
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: string): void => {
      if (stopping) return;
      stopping = true;
      logger.info('stopping', { signal });
      agent
        .stop()
        .then(() => resolve(0))
        .catch((err: unknown) => {
          logger.error('shutdown failed', { error: err instanceof Error ? err.stack : String(err) });
          resolve(1);
        });
    };
    onSignal = stop;
    // Announced only once a signal stops it cleanly: whoever waits for this line may stop it at once.
    logger.info('listening', {
      url: agent.listening.url,
      address: `${config.listen.host}:${agent.listening.port}`,
      member: config.memberName,
      endpoints: config.endpoints,
      // In the node's network namespace loopback callers need the token too (server/auth.ts).
      hostNetwork: config.hostNetwork,
    });
    if (signalled !== undefined) stop(signalled);
  });
}

/** `prepare`: decides how this pod's etcd starts (prepare/run.ts); a bad value exit 2. */
async function prepare(argv: string[], io: MainIo): Promise<number> {
  let options;
  try {
    options = loadPrepareOptions(process.env, argv);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    if (err.variable !== ARGV) return badConfig('prepare', err.message, io);
    io.stderr(renderUsageError(PREPARE_USAGE, err.message.slice(ARGV.length + 2)));
    return 2;
  }
  const [{ runPrepare }, { createLogger }] = await Promise.all([import('../prepare/run'), import('../observability/logger')]);
  return runPrepare(options, createLogger({ level: options.config.logLevel }));
}

/** The one line of a bad configuration value (docs/api.md §2: exit code 2). */
function badConfig(command: string, message: string, io: MainIo): number {
  io.stderr(`${PROGRAM} ${command}: invalid configuration: ${message}\n`);
  return 2;
}
