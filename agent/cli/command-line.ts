/**
 * The command line of the client commands (CONTRACT §7): which commands there are, their usage,
 * and argv → one validated ParsedCommand, or a UsageError (exit code 2). No call is made here.
 */
import { parseArgs } from 'node:util';
import { parseRetention, type Retention } from '../proto/maintenance';

/** The agent's address when neither `--agent` nor `ETCD_AGENT_URL` names one. */
export const DEFAULT_AGENT_URL = 'http://127.0.0.1:3501';

/** Usage of the client commands, printed with `--help` and after a usage error. */
export const CLIENT_USAGE = `usage: etcd-lifecycle-agent <command> [options]

commands (each calls a running agent):
  join NAME [--peer-url URL]... [--wait]   make NAME a voting member (exit 3: not complete yet, call again)
  leave NAME [--peer-url URL]... [--force] remove NAME from the cluster
  promote NAME                             promote the learner NAME once it is in sync
  members                                  list the members
  health                                   the cluster's health
  transfer-leader [--to NAME]              move leadership away from the agent's member
  defragment [--compact-retain N|DURATION] [--min-fragmentation F] [--min-db-size BYTES] [--no-compact] [--force] [--wait]
                                           compact first (keep the last N revisions, or 90s/30m/6h/2d), then
                                           defragment the members over the thresholds one at a time, the leader
                                           last after leadership moved, and disarm NOSPACE once there is room
                                           (exit 3: still running, call again; --wait calls again until it ends)

options:
  --agent URL            the agent (default $ETCD_AGENT_URL, else ${DEFAULT_AGENT_URL})
  --token-file FILE      bearer token for mutating calls (default $ETCD_AGENT_TOKEN_FILE)
  --timeout-seconds N    the call's deadline, 1-60 (default: the agent's)
  --json                 print the agent's JSON answer (the default unless stdout is a terminal)
  --summary              print one line a person reads (the default on a terminal)

exit codes: 0 complete, 1 failed, 2 usage, 3 in progress (call again), 4 refused as unsafe or busy (call again later)
`;

/** A client command's name. */
export type Command = 'join' | 'leave' | 'promote' | 'members' | 'health' | 'transfer-leader' | 'defragment';

const COMMANDS: ReadonlySet<string> = new Set<Command>(['join', 'leave', 'promote', 'members', 'health', 'transfer-leader', 'defragment']);

/** The usage of `defragment` alone, in the style of CLIENT_USAGE (printed by `defragment --help`). */
export const DEFRAGMENT_USAGE = `usage: etcd-lifecycle-agent defragment [options]

Defragments the cluster through a running agent (POST /v1/maintenance/defragment): a compaction first
when asked, then every member over the thresholds, one at a time, each only while the cluster is
healthy and keeps a quorum without it, followers first and the leader last once leadership moved to a
member already done; under etcd's NOSPACE alarm it disarms the alarm once every database is under its
quota less the margin. The run goes on in the agent after the call answers.

options:
  --compact-retain N|DURATION   compact first, keeping the last N revisions (10000) or the last period
                                (90s, 30m, 6h, 2d) (default: ETCD_AGENT_DEFRAG_COMPACT_RETAIN of the agent)
  --no-compact                  no compaction, whatever the agent's setting says (also --compact-retain none)
  --min-fragmentation F         only members whose (dbSize - dbSizeInUse) / dbSize is at least F, 0 < F <= 1
                                (default: ETCD_AGENT_DEFRAG_MIN_FRAGMENTATION, 0.45)
  --min-db-size BYTES           only members whose database is at least this big
                                (default: ETCD_AGENT_DEFRAG_MIN_DB_SIZE_BYTES, 104857600)
  --force                       also when the cluster would not keep a quorum without the member (one or two members)
  --wait                        call again until the run has ended: also while another agent's run, or a
                                membership change, holds the cluster (busy), and under NOSPACE while the
                                runner's agent clears it (so it may run on every member at once)
  plus --agent, --token-file, --timeout-seconds, --json, --summary (see etcd-lifecycle-agent --help)

exit codes: 0 done (or nothing to do), 3 still running (call again), 4 refused as unsafe or busy
(an unhealthy cluster, another change holds the lock, NOSPACE and another agent runs it), 1 failed, 2 usage
`;

/** True when `name` is one of the client commands. */
export function isClientCommand(name: string | undefined): name is Command {
  return name !== undefined && COMMANDS.has(name);
}

interface CommandSpec {
  /** Takes exactly one positional NAME. */
  named: boolean;
  /** Command-specific options, beyond the common ones. */
  options: ReadonlyArray<CommandOption>;
}

/** The options only some commands take. */
type CommandOption = 'peer-url' | 'wait' | 'force' | 'to' | 'compact-retain' | 'no-compact' | 'min-fragmentation' | 'min-db-size';

const SPECS: Readonly<Record<Command, CommandSpec>> = {
  join: { named: true, options: ['peer-url', 'wait'] },
  leave: { named: true, options: ['peer-url', 'force'] },
  promote: { named: true, options: [] },
  members: { named: false, options: [] },
  health: { named: false, options: [] },
  'transfer-leader': { named: false, options: ['to'] },
  defragment: { named: false, options: ['compact-retain', 'no-compact', 'min-fragmentation', 'min-db-size', 'force', 'wait'] },
};

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
  if (values['compact-retain'] !== undefined && values['no-compact'] === true) throw new UsageError('--compact-retain and --no-compact exclude each other');
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
 * answer (CONTRACT §7) unless `--summary` asks for one line, or stdout is a terminal (`tty`) and
 * `--json` was not given.
 */
export function parseCommand(command: Command, argv: string[], env: NodeJS.ProcessEnv = {}, tty = false): ParsedCommand {
  const spec = SPECS[command];
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
      },
    });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const { values, positionals } = parsed;
  const help = values.help === true;
  for (const option of ['peer-url', 'wait', 'force', 'to', 'compact-retain', 'no-compact', 'min-fragmentation', 'min-db-size'] as const) {
    if (values[option] !== undefined && !spec.options.includes(option)) {
      throw new UsageError(`${command} does not take --${option}`);
    }
  }
  if (!help) {
    if (spec.named && positionals.length !== 1) throw new UsageError(`${command} needs exactly one member NAME`);
    if (!spec.named && positionals.length > 0) throw new UsageError(`${command} takes no argument, got "${positionals[0]}"`);
  }
  if (values.to === '') throw new UsageError('--to needs a member name');
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
  const maintenance = defragmentOptions(values);
  return {
    command,
    ...maintenance,
    name: positionals[0],
    peerURLs: values['peer-url'] ?? [],
    wait: values.wait === true,
    force: values.force === true,
    to: values.to,
    agent,
    tokenFile: values['token-file'] ?? (env.ETCD_AGENT_TOKEN_FILE?.trim() || undefined),
    timeoutSeconds,
    json: values.json === true || (values.summary !== true && !tty),
    help,
  };
}
