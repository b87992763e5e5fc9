#!/usr/bin/env node
/**
 * Entry point: argv → `serve` or a client command. Wiring only; no logic.
 */
import { ConfigError, loadConfig } from './config';
import { isClientCommand, runCommand } from './cli/commands';

const USAGE = `usage: etcd-lifecycle-agent <command> [flags]

commands:
  serve                 run the agent (configuration: ETCD_AGENT_* variables or --flags)
  join NAME [--peer-url URL] [--wait]
  leave NAME [--force]
  promote NAME
  members
  health
  transfer-leader [--to NAME]
  kube-inject -f FILE   add the agent sidecar to Kubernetes YAML
`;

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
  const agent = await startAgent(config, { logger });
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
    case 'kube-inject':
      return (await import('./cli/kube-inject')).runKubeInject(rest, stdio);
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
    setTimeout(() => process.exit(code), 50);
  },
  (err: unknown) => {
    process.stderr.write(`etcd-lifecycle-agent: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
