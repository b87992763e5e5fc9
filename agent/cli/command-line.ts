/**
 * The command line of the client commands (docs/api.md §7): argv → one validated ParsedCommand, or a
 * UsageError (exit code 2). Which commands there are and their usage are in client-commands.ts.
 * No call is made here.
 */
import { parseArgs } from 'node:util';
import { parseRetention, type Retention } from '../proto/maintenance';
import { COMMAND_OPTIONS, COMMAND_SPECS, DEFAULT_AGENT_URL, type Command } from './client-commands';

/** A parsed command line. */
export interface ParsedCommand {
  command: Command;
  name?: string;
  peerURLs: string[];
  wait: boolean;
  force: boolean;
  to?: string;
  /** defragment: the compaction's retention, `false` for none (--no-compact), absent for the agent's setting. */
  compact?: Retention | false;
  minFragmentation?: number;
  minDbSizeBytes?: number;
  /** backup: no verification right after. */
  noVerify: boolean;
  /** recover: the member to recover from and the cluster id it must have (both as GET /v1/recovery shows them). */
  from?: string;
  clusterId?: string;
  agent: string;
  tokenFile?: string;
  timeoutSeconds?: number;
  json: boolean;
  help: boolean;
}

/** `defragment`'s own options → the request's fields; throws UsageError. */
function defragmentOptions(values: {
  'compact-retain'?: string;
  'no-compact'?: boolean;
  'min-fragmentation'?: string;
  'min-db-size'?: string;
}): Pick<ParsedCommand, 'compact' | 'minFragmentation' | 'minDbSizeBytes'> {
  const out: Pick<ParsedCommand, 'compact' | 'minFragmentation' | 'minDbSizeBytes'> = {};
  if (values['compact-retain'] !== undefined && values['no-compact'] === true)
    throw new UsageError('--compact-retain and --no-compact exclude each other');
  if (values['no-compact'] === true) out.compact = false;
  if (values['compact-retain'] === 'none') {
    out.compact = false;
  } else if (values['compact-retain'] !== undefined) {
    try {
      out.compact = parseRetention(values['compact-retain'], '--compact-retain');
    } catch (err) {
      throw new UsageError(err instanceof Error ? err.message : String(err));
    }
  }
  const fragmentation = values['min-fragmentation'];
  if (fragmentation !== undefined) {
    const f = /^\d*\.?\d+$/.test(fragmentation) ? Number(fragmentation) : NaN;
    if (!(f > 0 && f <= 1)) throw new UsageError(`--min-fragmentation "${fragmentation}" must be a number above 0 and at most 1`);
    out.minFragmentation = f;
  }
  const size = values['min-db-size'];
  if (size !== undefined) {
    if (!/^\d{1,15}$/.test(size)) throw new UsageError(`--min-db-size "${size}" must be a whole number of bytes`);
    out.minDbSizeBytes = Number(size);
  }
  return out;
}

/** A command line that cannot be run (exit code 2). */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/**
 * Parses the arguments after the command name; throws UsageError. The output is the agent's JSON
 * answer (docs/api.md §7) unless `--summary` asks for one line, or stdout is a terminal (`tty`) and
 * `--json` was not given.
 */
export function parseCommand(command: Command, argv: string[], env: NodeJS.ProcessEnv = {}, tty = false): ParsedCommand {
  const spec = COMMAND_SPECS[command];
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: true,
      options: {
        agent: { type: 'string' },
        'token-file': { type: 'string' },
        'timeout-seconds': { type: 'string' },
        json: { type: 'boolean' },
        summary: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        'peer-url': { type: 'string', multiple: true },
        wait: { type: 'boolean' },
        force: { type: 'boolean' },
        to: { type: 'string' },
        'compact-retain': { type: 'string' },
        'no-compact': { type: 'boolean' },
        'min-fragmentation': { type: 'string' },
        'min-db-size': { type: 'string' },
        'no-verify': { type: 'boolean' },
        from: { type: 'string' },
        'cluster-id': { type: 'string' },
      },
    });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const { values, positionals } = parsed;
  const help = values.help === true;
  for (const option of COMMAND_OPTIONS) {
    if (values[option] !== undefined && !spec.options.includes(option)) {
      throw new UsageError(`${command} does not take --${option}`);
    }
  }
  if (!help) {
    if (spec.named && positionals.length !== 1) throw new UsageError(`${command} needs exactly one member NAME`);
    if (!spec.named && positionals.length > 0) throw new UsageError(`${command} takes no argument, got "${positionals[0]}"`);
  }
  if (values.to === '') throw new UsageError('--to needs a member name');
  if (
    command === 'recover' &&
    !help &&
    (values.from === undefined || values.from === '' || values['cluster-id'] === undefined || values['cluster-id'] === '')
  ) {
    throw new UsageError('recover needs --from NAME and --cluster-id ID (both as GET /v1/recovery shows them)');
  }
  if (values.json === true && values.summary === true) throw new UsageError('--json and --summary exclude each other');

  const agent = values.agent ?? (env.ETCD_AGENT_URL?.trim() || DEFAULT_AGENT_URL);
  if (!/^https?:\/\/[^/\s]+\/?$/i.test(agent)) throw new UsageError(`--agent "${agent}" is not http(s)://host:port`);

  let timeoutSeconds: number | undefined;
  if (values['timeout-seconds'] !== undefined) {
    timeoutSeconds = Number(values['timeout-seconds']);
    if (!/^\d+$/.test(values['timeout-seconds']) || timeoutSeconds < 1 || timeoutSeconds > 60) {
      throw new UsageError(`--timeout-seconds "${values['timeout-seconds']}" must be a whole number from 1 to 60`);
    }
  }
  return {
    command,
    ...defragmentOptions(values),
    name: positionals[0],
    peerURLs: values['peer-url'] ?? [],
    wait: values.wait === true,
    force: values.force === true,
    noVerify: values['no-verify'] === true,
    to: values.to,
    from: values.from,
    clusterId: values['cluster-id'],
    agent,
    tokenFile: values['token-file'] ?? (env.ETCD_AGENT_TOKEN_FILE?.trim() || undefined),
    timeoutSeconds,
    json: values.json === true || (values.summary !== true && !tty),
    help,
  };
}
