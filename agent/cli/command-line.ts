/**
 * The command line of the client commands (CONTRACT §7): which commands there are, their usage,
 * and argv → one validated ParsedCommand, or a UsageError (exit code 2). No call is made here.
 */
import { parseArgs } from 'node:util';

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
  recovery                                 the recovery plan when the quorum is lost for good: which members
                                           answer, how far their logs reach, whom to recover from (read only)
  recover --from NAME --cluster-id ID [--force]
                                           restart NAME alone with --force-new-cluster, once the quorum has been
                                           lost for ETCD_AGENT_RECOVERY_MIN_LOSS_SECONDS; send it to NAME's own
                                           agent (--agent); refused with its figures unless every gate holds
                                           (exit 4); --force passes over a more advanced survivor

options:
  --agent URL            the agent (default $ETCD_AGENT_URL, else ${DEFAULT_AGENT_URL})
  --token-file FILE      bearer token for mutating calls (default $ETCD_AGENT_TOKEN_FILE)
  --timeout-seconds N    the call's deadline, 1-60 (default: the agent's)
  --json                 print the agent's JSON answer (the default unless stdout is a terminal)
  --summary              print one line a person reads (the default on a terminal)

exit codes: 0 complete, 1 failed, 2 usage, 3 in progress (call again), 4 refused as unsafe or busy (call again later)
`;

/** A client command's name. */
export type Command = 'join' | 'leave' | 'promote' | 'members' | 'health' | 'transfer-leader' | 'recovery' | 'recover';

const COMMANDS: ReadonlySet<string> = new Set<Command>(['join', 'leave', 'promote', 'members', 'health', 'transfer-leader', 'recovery', 'recover']);

/** True when `name` is one of the client commands. */
export function isClientCommand(name: string | undefined): name is Command {
  return name !== undefined && COMMANDS.has(name);
}

interface CommandSpec {
  /** Takes exactly one positional NAME. */
  named: boolean;
  /** Command-specific options, beyond the common ones. */
  options: ReadonlyArray<'peer-url' | 'wait' | 'force' | 'to' | 'from' | 'cluster-id'>;
}

const SPECS: Readonly<Record<Command, CommandSpec>> = {
  join: { named: true, options: ['peer-url', 'wait'] },
  leave: { named: true, options: ['peer-url', 'force'] },
  promote: { named: true, options: [] },
  members: { named: false, options: [] },
  health: { named: false, options: [] },
  'transfer-leader': { named: false, options: ['to'] },
  recovery: { named: false, options: [] },
  recover: { named: false, options: ['from', 'cluster-id', 'force'] },
};

/** A parsed command line. */
export interface ParsedCommand {
  command: Command;
  name?: string;
  peerURLs: string[];
  wait: boolean;
  force: boolean;
  to?: string;
  from?: string;
  clusterId?: string;
  agent: string;
  tokenFile?: string;
  timeoutSeconds?: number;
  json: boolean;
  help: boolean;
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
        from: { type: 'string' },
        'cluster-id': { type: 'string' },
      },
    });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const { values, positionals } = parsed;
  const help = values.help === true;
  for (const option of ['peer-url', 'wait', 'force', 'to', 'from', 'cluster-id'] as const) {
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
