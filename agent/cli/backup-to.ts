/**
 * `etcd-lifecycle-agent backup --to -`: one snapshot straight from etcd to stdout (backup/stream-out.ts),
 * with the agent's own etcd settings from the environment and flags, as `serve` reads them. Only `-`
 * (stdout) is a target: a store is the agent's (POST /v1/backups). Logs go to stderr, so stdout holds
 * the snapshot's bytes only. Exit 0 when the whole snapshot was written, 1 when it failed (what was
 * written is then not a snapshot: etcd's restore refuses it by its missing hash), 2 for bad usage.
 */
import { ConfigError, loadConfig } from '../config/config';
import { renderUsageError } from '../lib/usage';
/** Where it writes its messages (stdout is the snapshot's). */
interface BackupToIo {
  stderr: (s: string) => void;
}
import { clientUsage } from './client-commands';

/** Runs `backup --to -`; resolves to the exit code. */
export async function runBackupTo(argv: string[], io: BackupToIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const at = argv.indexOf('--to');
  const target = argv[at + 1];
  if (target !== '-') {
    io.stderr(
      renderUsageError(clientUsage('backup'), `--to takes only - (stdout), got ${target === undefined ? 'nothing' : `"${target}"`}`),
    );
    return 2;
  }
  let config;
  try {
    const loaded = loadConfig(env, [...argv.slice(0, at), ...argv.slice(at + 2)]);
    if (loaded.rest.length > 0) {
      io.stderr(renderUsageError(clientUsage('backup'), `unknown argument ${loaded.rest[0]}`));
      return 2;
    }
    config = loaded.config;
  } catch (err) {
    if (err instanceof ConfigError) {
      io.stderr(renderUsageError(clientUsage('backup'), err.message));
      return 2;
    }
    throw err;
  }
  const [{ EtcdCluster }, { connectionOptions }, { createLogger }, { streamSnapshot }, { Deadline }, { toAgentError }] = await Promise.all([
    import('../etcd/cluster-client'),
    import('../etcd/connection-options'),
    import('../observability/logger'),
    import('../backup/stream-out'),
    import('../lib/deadline'),
    import('../etcd/errors'),
  ]);
  const logger = createLogger({ level: config.logLevel, stream: process.stderr });
  const cluster = new EtcdCluster(connectionOptions(config, logger));
  const controller = new AbortController();
  const stop = (): void => controller.abort(new Error('stopped by a signal'));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  try {
    const streamed = await streamSnapshot(cluster, process.stdout, {
      deadline: Deadline.in(config.timeoutSeconds * 1000),
      statusTimeoutMs: config.statusTimeoutMs,
      signal: controller.signal,
    });
    logger.info('snapshot streamed', { ...streamed });
    return 0;
  } catch (err) {
    io.stderr(`etcd-lifecycle-agent backup: ${toAgentError(err).message}\n`);
    return 1;
  } finally {
    process.off('SIGTERM', stop);
    process.off('SIGINT', stop);
    cluster.close();
  }
}
