/**
 * The client commands (docs/api.md §7): which there are, which options each takes, and what `--help`
 * says of each (usage.ts renders it). command-line.ts parses argv against these specs.
 *
 * Invariant: a spec's `options` are what its command accepts beyond the common flags (the parser
 * refuses any other), and its `usage` describes those same flags.
 */
import type { CommandUsage, UsageOption } from '../lib/usage';

/** The agent's address when neither `--agent` nor `ETCD_AGENT_URL` names one. */
export const DEFAULT_AGENT_URL = 'http://127.0.0.1:3501';

/** A client command's name. */
export type Command =
  'join' | 'leave' | 'promote' | 'members' | 'health' | 'transfer-leader' | 'defragment' | 'backup' | 'backups' | 'recovery' | 'recover';

/** True when `name` is one of the client commands. */
export function isClientCommand(name: string | undefined): name is Command {
  return name !== undefined && (CLIENT_COMMANDS as readonly string[]).includes(name);
}

/** What the command line knows of one client command. */
export interface CommandSpec {
  /** Takes exactly one positional NAME. */
  named: boolean;
  /** Command-specific options, beyond the common ones. */
  options: ReadonlyArray<CommandOption>;
  /** What `--help` says of it (usage.ts); the common flags are added to its options. */
  usage: Omit<CommandUsage, 'name' | 'options' | 'notes'> & { options: UsageOption[] };
}

/** The options only some commands take. */
export type CommandOption =
  | 'peer-url'
  | 'wait'
  | 'force'
  | 'to'
  | 'compact-retain'
  | 'no-compact'
  | 'min-fragmentation'
  | 'min-db-size'
  | 'no-verify'
  | 'from'
  | 'cluster-id';
/** Every option some command takes and another does not. */
export const COMMAND_OPTIONS: readonly CommandOption[] = [
  'peer-url',
  'wait',
  'force',
  'to',
  'compact-retain',
  'no-compact',
  'min-fragmentation',
  'min-db-size',
  'no-verify',
  'from',
  'cluster-id',
];

/** Exit codes of the client commands (docs/api.md §7), as their help states them. */
export const EXIT_CODES_NOTE =
  'exit codes: 0 complete, 1 failed, 2 usage, 3 in progress (call again), 4 refused as unsafe or busy, or no quorum (call again later)';

/** The flags every client command takes, after its own. */
const COMMON_OPTIONS: readonly UsageOption[] = [
  { flag: '--agent URL', variable: 'ETCD_AGENT_URL', default: DEFAULT_AGENT_URL, meaning: 'the agent to call' },
  {
    flag: '--token-file FILE',
    variable: 'ETCD_AGENT_TOKEN_FILE',
    meaning: 'file holding the bearer token for mutating calls (a trailing newline is ignored)',
  },
  { flag: '--timeout-seconds N', default: "the agent's", meaning: "the call's deadline, 1-60" },
  { flag: '--json', meaning: "print the agent's JSON answer (the default unless stdout is a terminal)" },
  { flag: '--summary', meaning: 'print one line a person reads (the default on a terminal)' },
];

const PEER_URL: UsageOption = {
  flag: '--peer-url URL',
  default: "from the agent's ETCD_AGENT_PEER_URL_TEMPLATE",
  meaning: "the member's peer URL; repeat it for several",
};

/** Each client command's spec. */
export const COMMAND_SPECS: Readonly<Record<Command, CommandSpec>> = {
  join: {
    named: true,
    options: ['peer-url', 'wait'],
    usage: {
      synopsis: 'NAME [--peer-url URL]... [--wait]',
      summary: 'make NAME a voting member: added as a learner, promoted once in sync (exit 3: not complete yet, call again)',
      options: [
        PEER_URL,
        { flag: '--wait', meaning: "wait inside the call's deadline until NAME is a started voter, promoting it when in sync" },
      ],
    },
  },
  leave: {
    named: true,
    options: ['peer-url', 'force'],
    usage: {
      synopsis: 'NAME [--peer-url URL]... [--force]',
      summary: 'remove NAME from the cluster, moving leadership away first when it leads',
      options: [
        PEER_URL,
        {
          flag: '--force',
          meaning: 'remove a voter even when the remaining healthy voters are fewer than a quorum (never the last voter)',
        },
      ],
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
        {
          flag: '--min-db-size BYTES',
          variable: 'ETCD_AGENT_DEFRAG_MIN_DB_SIZE_BYTES',
          default: "the agent's (104857600)",
          meaning: 'only members whose database is at least this big',
        },
        { flag: '--force', meaning: 'also when the cluster would not keep a quorum without the member (one or two members)' },
        {
          flag: '--wait',
          meaning:
            'call again until the run has ended: also while another run or a membership change holds the cluster (busy), and under NOSPACE while the runner clears it',
        },
      ],
    },
  },
  backup: {
    named: false,
    options: ['no-verify'],
    usage: {
      synopsis: '[--no-verify] | --to -',
      summary:
        "take a backup into the agent's store (ETCD_AGENT_BACKUP_STORE) and verify it; with --to -, stream one snapshot to stdout instead, without an agent (exit 3: still running)",
      details: [
        'POST /v1/backups: a snapshot of a healthy voter, a follower first, under the cluster lock, streamed into the store; its manifest is written once it is whole; then it is read back, checked and restored into a scratch directory.',
        "With --to -, nothing is called: the snapshot comes straight from etcd, through the agent's own settings (ETCD_AGENT_ENDPOINTS, TLS, authentication), for a backup tool that stores it (KubeBlocks' datasafed).",
      ],
      options: [
        { flag: '--no-verify', meaning: 'do not verify it right after (the verification schedule still will)' },
        { flag: '--to -', meaning: "stream the snapshot to stdout (etcd's snapshot format, as etcdutl snapshot restore reads it)" },
      ],
    },
  },
  backups: {
    named: false,
    options: [],
    usage: { synopsis: '', summary: "the store's backups, newest first, with their verification state", options: [] },
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
  const { usage } = COMMAND_SPECS[command];
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
export const CLIENT_COMMANDS: readonly Command[] = [
  'join',
  'leave',
  'promote',
  'members',
  'health',
  'transfer-leader',
  'defragment',
  'backup',
  'backups',
  'recovery',
  'recover',
];
