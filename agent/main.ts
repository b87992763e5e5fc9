#!/usr/bin/env node
/**
 * Entry point: argv → `serve` or a client command. Wiring only; no logic.
 */
import { ConfigError, loadConfig } from './config';
import { runCommand } from './cli/commands';
import { isClientCommand } from './cli/command-line';
import { tlsFilesProblem } from './etcd/credentials';
import { settingsHelp } from './settings';
import { EXIT_DRAIN_MS } from './timings';

const USAGE = `usage: etcd-lifecycle-agent <command> [flags]

commands:
  serve                 run the agent (configuration: ETCD_AGENT_* variables or --flags)
  join NAME [--peer-url URL] [--wait]
  leave NAME [--force]
  promote NAME
  members
  health
  transfer-leader [--to NAME]
  recovery              the recovery plan when the quorum is lost for good (read only)
  recover --from NAME --cluster-id ID [--force]
                        recover from NAME once the quorum is lost for good; call NAME's own agent
  kube-inject -f FILE   add the agent sidecar to Kubernetes YAML
  prepare --data-dir DIR [--initial-cluster N=URL,...] [--flags-file FILE]
                        decide how this pod's etcd starts (an init container); exit 0 once decided

${settingsHelp()}`;

async function serve(argv: string[]): Promise<number> {
  let loaded;
  try {
    loaded = loadConfig(process.env, argv);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`etcd-lifecycle-agent: invalid configuration: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (loaded.rest.length > 0) {
    process.stderr.write(`etcd-lifecycle-agent: unknown argument ${loaded.rest[0]}\n${USAGE}`);
    return 2;
  }
  const { config } = loaded;
  // With prepare's data directory and flags file (kube-inject gives the sidecar both), the agent can
  // restart and prepare its pod's etcd again: the recovery's act and a survivor's rejoin.
  let prepareOptions;
  if ((process.env.ETCD_AGENT_DATA_DIR ?? '').trim() !== '') {
    try {
      prepareOptions = (await import('./prepare/options')).loadPrepareOptions(process.env, []);
    } catch (err) {
      if (err instanceof ConfigError) {
        process.stderr.write(`etcd-lifecycle-agent: invalid configuration: ${err.message}\n`);
        return 2;
      }
      throw err;
    }
  }
  if (config.etcdCaFile !== undefined) {
    // Read once here so that files that do not load stop start-up as a bad value does (exit 2);
    // later rotations that do not load keep the previous credentials instead (etcd/credentials.ts).
    const problem = tlsFilesProblem({ caFile: config.etcdCaFile, certFile: config.etcdCertFile, keyFile: config.etcdKeyFile });
    if (problem !== undefined) {
      process.stderr.write(`etcd-lifecycle-agent: invalid configuration: ETCD_AGENT_ETCD_CA_FILE: the etcd TLS files do not load: ${problem}\n`);
      return 2;
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
  const [{ startAgent }, { createLogger }] = await Promise.all([import('./agent'), import('./observability/logger')]);
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

async function prepare(argv: string[]): Promise<number> {
  const { loadPrepareOptions } = await import('./prepare/options');
  let options;
  try {
    options = loadPrepareOptions(process.env, argv);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`etcd-lifecycle-agent prepare: invalid configuration: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const [{ runPrepare }, { createLogger }] = await Promise.all([import('./prepare/run'), import('./observability/logger')]);
  return runPrepare(options, createLogger({ level: options.config.logLevel }));
}

const stdio = {
  stdout: (s: string) => void process.stdout.write(s),
  stderr: (s: string) => void process.stderr.write(s),
  isTTY: process.stdout.isTTY === true,
};

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'serve':
      return serve(rest);
    case 'prepare':
      return prepare(rest);
    case 'kube-inject':
      return (await import('./cli/kube-inject-command')).runKubeInject(rest, stdio);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE);
      return command === undefined ? 2 : 0;
    default:
      if (isClientCommand(command)) return runCommand(command, rest, stdio);
      process.stderr.write(`etcd-lifecycle-agent: unknown command ${command}\n${USAGE}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Let the last log lines drain, then leave even if a stray handle (a gRPC channel) lingers. The
    // timer is not unref'd: were the process left to exit on an empty event loop, Node would first
    // drop its signal handlers, and a second SIGTERM in that moment would kill it by signal.
    setTimeout(() => process.exit(code), EXIT_DRAIN_MS);
  },
  (err: unknown) => {
    process.stderr.write(`etcd-lifecycle-agent: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
