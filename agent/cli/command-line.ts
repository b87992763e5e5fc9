/**
 * The command line of the client commands (CONTRACT §7): which commands there are, their usage
 * (usage.ts: what `--help` prints), and argv → one validated ParsedCommand, or a UsageError (exit
 * code 2). No call is made here.
 */
import { parseArgs } from 'node:util';
import { parseRetention, type Retention } from '../proto/maintenance';
import type { CommandUsage, UsageOption } from '../lib/usage';

/** The agent's address when neither `--agent` nor `ETCD_AGENT_URL` names one. */
export const DEFAULT_AGENT_URL = 'http://127.0.0.1:3501';

/** A client command's name. */
export type Command = 'join' | 'leave' | 'promote' | 'members' | 'health' | 'transfer-leader' | 'defragment' | 'recovery' | 'recover';

/** True when `name` is one of the client commands. */
export function isClientCommand(name: string | undefined): name is Command {
  return name !== undefined && (CLIENT_COMMANDS as readonly string[]).includes(name);
}

interface CommandSpec {
  /** Takes exactly one positional NAME. */
  named: boolean;
  /** Command-specific options, beyond the common ones. */
  options: ReadonlyArray<CommandOption>;
  /** What `--help` says of it (usage.ts); the common flags are added to its options. */
  usage: Omit<CommandUsage, 'name' | 'options' | 'notes'> & { options: UsageOption[] };
}

/** The options only some commands take. */
type CommandOption = 'peer-url' | 'wait' | 'force' | 'to' | 'compact-retain' | 'no-compact' | 'min-fragmentation' | 'min-db-size' | 'from' | 'cluster-id';
const COMMAND_OPTIONS: readonly CommandOption[] = ['peer-url', 'wait', 'force', 'to', 'compact-retain', 'no-compact', 'min-fragmentation', 'min-db-size', 'from', 'cluster-id'];

/** Exit codes of the client commands (CONTRACT §7), as their help states them. */
export const EXIT_CODES_NOTE =
  'exit codes: 0 complete, 1 failed, 2 usage, 3 in progress (call again), 4 refused as unsafe or busy, or no quorum (call again later)';

/** The flags every client command takes, after its own. */
const COMMON_OPTIONS: readonly UsageOption[] = [
  { flag: '--agent URL', variable: 'ETCD_AGENT_URL', default: DEFAULT_AGENT_URL, meaning: 'the agent to call' },
  { flag: '--token-file FILE', variable: 'ETCD_AGENT_TOKEN_FILE', meaning: 'file holding the bearer token for mutating calls (a trailing newline is ignored)' },
  { flag: '--timeout-seconds N', default: "the agent's", meaning: "the call's deadline, 1-60" },
  { flag: '--json', meaning: "print the agent's JSON answer (the default unless stdout is a terminal)" },
  { flag: '--summary', meaning: 'print one line a person reads (the default on a terminal)' },
];

const PEER_URL: UsageOption = {
  flag: '--peer-url URL',
  default: "from the agent's ETCD_AGENT_PEER_URL_TEMPLATE",
  meaning: "the member's peer URL; repeat it for several",
};

const SPECS: Readonly<Record<Command, CommandSpec>> = {
  join: {
    named: true,
    options: ['peer-url', 'wait'],
    usage: {
      synopsis: 'NAME [--peer-url URL]... [--wait]',
      summary: 'make NAME a voting member: added as a learner, promoted once in sync (exit 3: not complete yet, call again)',
      options: [PEER_URL, { flag: '--wait', meaning: "wait inside the call's deadline until NAME is a started voter, promoting it when in sync" }],
    },
  },
  leave: {
    named: true,
    options: ['peer-url', 'force'],
    usage: {
      synopsis: 'NAME [--peer-url URL]... [--force]',
      summary: 'remove NAME from the cluster, moving leadership away first when it leads',
      options: [PEER_URL, { flag: '--force', meaning: 'remove a voter even when the remaining healthy voters are fewer than a quorum (never the last voter)' }],
    },
  },
  promote: {
    named: true,
    options: [],
    usage: { synopsis: 'NAME', summary: 'promote the learner NAME once it is in sync', options: [] },
  },
  members: {
    named: false,
    options: [],
    usage: { synopsis: '', summary: 'list the members, read through a quorum', options: [] },
  },
  health: {
    named: false,
    options: [],
    usage: { synopsis: '', summary: "the cluster's health, observed live (exit 1 when unavailable or unknown)", options: [] },
  },
  'transfer-leader': {
    named: false,
    options: ['to'],
    usage: {
      synopsis: '[--to NAME]',
      summary: "move leadership to NAME, or away from the agent's own member to the most up-to-date healthy voter",
      options: [{ flag: '--to NAME', meaning: 'the voter to hand leadership to' }],
    },
  },
  defragment: {
    named: false,
    options: ['compact-retain', 'no-compact', 'min-fragmentation', 'min-db-size', 'force', 'wait'],
    usage: {
      synopsis: '[--compact-retain N|DURATION | --no-compact] [--min-fragmentation F] [--min-db-size BYTES] [--force] [--wait]',
      summary:
        'compact, then defragment the members over the thresholds one at a time (the leader last, after leadership moved) and disarm NOSPACE once there is room (exit 3: still running, call again)',
      details: [
        'POST /v1/maintenance/defragment: each member only while the cluster is healthy and keeps a quorum without it; under NOSPACE the alarm is disarmed once every database is under its quota less the margin. The run goes on in the agent after the call answers.',
      ],
      options: [
        {
          flag: '--compact-retain N|DURATION',
          variable: 'ETCD_AGENT_DEFRAG_COMPACT_RETAIN',
          default: "the agent's",
          meaning: 'compact first, keeping the last N revisions (10000) or the last period (90s, 30m, 6h, 2d); none: no compaction',
        },
        { flag: '--no-compact', meaning: "no compaction, whatever the agent's setting says (also --compact-retain none)" },
        {
          flag: '--min-fragmentation F',
          variable: 'ETCD_AGENT_DEFRAG_MIN_FRAGMENTATION',
          default: "the agent's (0.45)",
          meaning: 'only members whose (dbSize - dbSizeInUse) / dbSize is at least F, 0 < F <= 1',
        },
        { flag: '--min-db-size BYTES', variable: 'ETCD_AGENT_DEFRAG_MIN_DB_SIZE_BYTES', default: "the agent's (104857600)", meaning: 'only members whose database is at least this big' },
        { flag: '--force', meaning: 'also when the cluster would not keep a quorum without the member (one or two members)' },
        {
          flag: '--wait',
          meaning:
            'call again until the run has ended: also while another run or a membership change holds the cluster (busy), and under NOSPACE while the runner clears it',
        },
      ],
    },
  },
  recovery: {
    named: false,
    options: [],
    usage: {
      synopsis: '',
      summary:
        'the recovery plan when the quorum is lost for good: which members answer, how far their logs reach, whom to recover from (read only)',
      options: [],
    },
  },
  recover: {
    named: false,
    options: ['from', 'cluster-id', 'force'],
    usage: {
      synopsis: '--from NAME --cluster-id ID [--force]',
      summary:
        "restart NAME alone with --force-new-cluster, once the quorum has been lost for ETCD_AGENT_RECOVERY_MIN_LOSS_SECONDS; send it to NAME's own agent (--agent); refused with its figures unless every gate holds (exit 4)",
      options: [
        { flag: '--from NAME', meaning: 'the surviving member to recover from, as GET /v1/recovery names it' },
        { flag: '--cluster-id ID', meaning: 'the cluster id that member must have, as GET /v1/recovery shows it' },
        { flag: '--force', meaning: 'recover from NAME even when another survivor knows a higher commit index' },
      ],
    },
  },
};

/** The usage of client command `command` (usage.ts): its own flags, then the common ones, then the exit codes. */
export function clientUsage(command: Command): CommandUsage {
  const { usage } = SPECS[command];
  return {
    name: command,
    ...usage,
    synopsis: `${usage.synopsis}${usage.synopsis === '' ? '' : ' '}[flags]`,
    details: ["It calls a running agent over HTTP and prints the agent's answer.", ...(usage.details ?? [])],
    options: [...usage.options, ...COMMON_OPTIONS],
    notes: [EXIT_CODES_NOTE],
  };
}

/** Every client command, in the order the overview lists them. */
export const CLIENT_COMMANDS: readonly Command[] = ['join', 'leave', 'promote', 'members', 'health', 'transfer-leader', 'defragment', 'recovery', 'recover'];

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
  if (command === 'recover' && !help && (values.from === undefined || values.from === '' || values['cluster-id'] === undefined || values['cluster-id'] === '')) {
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
