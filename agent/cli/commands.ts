/**
 * The client commands of CONTRACT §7: `join`, `leave`, `promote`, `members`,
 * `health`, `transfer-leader`. Each is one call to a running agent; the exit
 * code says what a script should do next (0 done, 3 call again, 4 call again
 * later, 1 failed, 2 usage), and the output is the agent's JSON answer or, with
 * `--summary` or on a terminal, one line a person reads.
 */
import { parseArgs } from 'node:util';
import { AgentAnswer, AgentCallError, AgentClient } from './client';
import { CLI_ANSWER_MARGIN_SECONDS, CLI_CHANGE_SECONDS, CLI_READ_SECONDS } from '../timings';

/** Exit codes of the client commands (CONTRACT §7). */
export const EXIT = Object.freeze({
  complete: 0,
  failed: 1,
  usage: 2,
  inProgress: 3,
  refused: 4,
});

/** Where the commands write; tests pass their own. */
export interface CliIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  /** stdout is a terminal: a person reads it, so the default output is the one-line summary. */
  isTTY?: boolean;
}

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

options:
  --agent URL            the agent (default $ETCD_AGENT_URL, else ${DEFAULT_AGENT_URL})
  --token-file FILE      bearer token for mutating calls (default $ETCD_AGENT_TOKEN_FILE)
  --timeout-seconds N    the call's deadline, 1-60 (default: the agent's)
  --json                 print the agent's JSON answer (the default unless stdout is a terminal)
  --summary              print one line a person reads (the default on a terminal)

exit codes: 0 complete, 1 failed, 2 usage, 3 in progress (call again), 4 refused as unsafe or busy (call again later)
`;

type Command = 'join' | 'leave' | 'promote' | 'members' | 'health' | 'transfer-leader';

const COMMANDS: ReadonlySet<string> = new Set<Command>(['join', 'leave', 'promote', 'members', 'health', 'transfer-leader']);

/** True when `name` is one of the client commands. */
export function isClientCommand(name: string | undefined): name is Command {
  return name !== undefined && COMMANDS.has(name);
}

interface CommandSpec {
  /** Takes exactly one positional NAME. */
  named: boolean;
  /** Command-specific options, beyond the common ones. */
  options: ReadonlyArray<'peer-url' | 'wait' | 'force' | 'to'>;
}

const SPECS: Readonly<Record<Command, CommandSpec>> = {
  join: { named: true, options: ['peer-url', 'wait'] },
  leave: { named: true, options: ['peer-url', 'force'] },
  promote: { named: true, options: [] },
  members: { named: false, options: [] },
  health: { named: false, options: [] },
  'transfer-leader': { named: false, options: ['to'] },
};

/** A parsed command line. */
export interface ParsedCommand {
  command: Command;
  name?: string;
  peerURLs: string[];
  wait: boolean;
  force: boolean;
  to?: string;
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
      },
    });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const { values, positionals } = parsed;
  const help = values.help === true;
  for (const option of ['peer-url', 'wait', 'force', 'to'] as const) {
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
  return {
    command,
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

/** The HTTP call a parsed command makes. */
export function requestFor(cmd: ParsedCommand): { method: 'GET' | 'POST'; path: string; body?: Record<string, unknown> } {
  const deadline = cmd.timeoutSeconds === undefined ? {} : { timeoutSeconds: cmd.timeoutSeconds };
  const peers = cmd.peerURLs.length === 0 ? {} : { peerURLs: cmd.peerURLs };
  switch (cmd.command) {
    case 'join':
      return { method: 'POST', path: '/v1/members/join', body: { name: cmd.name, ...peers, ...(cmd.wait ? { wait: true } : {}), ...deadline } };
    case 'leave':
      return { method: 'POST', path: '/v1/members/leave', body: { name: cmd.name, ...peers, ...(cmd.force ? { force: true } : {}), ...deadline } };
    case 'promote':
      return { method: 'POST', path: '/v1/members/promote', body: { name: cmd.name, ...deadline } };
    case 'transfer-leader':
      return { method: 'POST', path: '/v1/leader/transfer', body: { ...(cmd.to === undefined ? {} : { to: cmd.to }), ...deadline } };
    case 'members':
      return { method: 'GET', path: '/v1/members' };
    case 'health':
      return { method: 'GET', path: '/v1/health' };
  }
}

/** The exit code for an answer: 0 complete, 3 in progress (202), 4 unsafe or busy, else 1. */
export function exitCodeFor(answer: AgentAnswer): number {
  if (answer.status === 202) return EXIT.inProgress;
  if (answer.status >= 200 && answer.status < 300) return answer.body.complete === false ? EXIT.inProgress : EXIT.complete;
  const code = errorOf(answer.body).code;
  return code === 'unsafe' || code === 'busy' ? EXIT.refused : EXIT.failed;
}

/** Runs a client command; resolves to its exit code, never rejects. */
export async function runCommand(command: Command, argv: string[], io: CliIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let cmd: ParsedCommand;
  try {
    cmd = parseCommand(command, argv, env, io.isTTY === true);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr(`etcd-lifecycle-agent ${command}: ${err.message}\n${CLIENT_USAGE}`);
    return EXIT.usage;
  }
  if (cmd.help) {
    io.stdout(CLIENT_USAGE);
    return EXIT.complete;
  }
  const request = requestFor(cmd);
  // The agent answers within the call's deadline (at most 60 s); leave it time to say so itself.
  const waitSeconds = (cmd.timeoutSeconds ?? (request.method === 'GET' ? CLI_READ_SECONDS : CLI_CHANGE_SECONDS)) + CLI_ANSWER_MARGIN_SECONDS;
  const client = new AgentClient({ url: cmd.agent, tokenFile: cmd.tokenFile, timeoutMs: waitSeconds * 1000 });
  let answer: AgentAnswer;
  try {
    answer = request.method === 'GET' ? await client.get(request.path) : await client.post(request.path, request.body ?? {});
  } catch (err) {
    if (!(err instanceof AgentCallError)) throw err;
    io.stderr(`etcd-lifecycle-agent ${command}: ${err.message}\n`);
    return EXIT.failed;
  }
  const exit = exitCodeFor(answer);
  if (cmd.json) io.stdout(`${JSON.stringify(answer.body, null, 2)}\n`);
  // `/v1/health` answers 503 with the observation itself (and an error envelope): show both.
  const observation = cmd.command === 'health' && typeof answer.body.status === 'string';
  if (!cmd.json && (answer.status < 300 || observation)) io.stdout(`${summarize(cmd, answer.body)}\n`);
  if (answer.status >= 300 && (!observation || answer.body.error !== undefined)) {
    io.stderr(`etcd-lifecycle-agent ${command}: ${describeError(answer)}\n`);
  }
  return exit;
}

/** One line for an error answer: `unsafe: removing … (call again later)`. */
export function describeError(answer: AgentAnswer): string {
  const { code, message } = errorOf(answer.body);
  const hint = code === 'unsafe' || code === 'busy' ? ' (refused; call again later)' : '';
  return `${code ?? `HTTP ${answer.status}`}: ${message ?? 'no message'}${hint}`;
}

function errorOf(body: Record<string, unknown>): { code?: string; message?: string } {
  const error = body.error;
  if (typeof error !== 'object' || error === null) return {};
  const { code, message } = error as { code?: unknown; message?: unknown };
  return { code: typeof code === 'string' ? code : undefined, message: typeof message === 'string' ? message : undefined };
}

/** The short human summary of a successful answer. */
export function summarize(cmd: Pick<ParsedCommand, 'command' | 'name'>, body: Record<string, unknown>): string {
  const outcome = str(body.outcome);
  switch (cmd.command) {
    case 'join':
    case 'promote': {
      const state = body.complete === false ? 'not complete: call again' : 'complete';
      const phase = str(body.phase);
      return `${cmd.name}: ${outcome} (${phase === '' ? '' : `${phase}, `}${state})`;
    }
    case 'leave':
      return body.leaderTransferred === true ? `${cmd.name}: ${outcome} (leadership moved away first)` : `${cmd.name}: ${outcome}`;
    case 'transfer-leader': {
      const leader = record(body.leader);
      return leader.name === undefined ? outcome : `${outcome} (leader: ${str(leader.name) || str(leader.id)})`;
    }
    case 'members':
      return summarizeMembers(body);
    case 'health':
      return summarizeHealth(body);
  }
}

function summarizeMembers(body: Record<string, unknown>): string {
  const cluster = record(body.cluster);
  const members = Array.isArray(body.members) ? body.members.map(record) : [];
  const head = `cluster ${str(cluster.id)}: ${members.length} members (${str(cluster.voters)} voters, ${str(cluster.learners)} learners)`;
  const lines = members.map((m) => {
    const role = m.started === false ? 'unstarted' : m.isLearner === true ? 'learner' : 'voter';
    const name = str(m.name) === '' ? '-' : str(m.name);
    const peers = Array.isArray(m.peerURLs) ? m.peerURLs.join(',') : '';
    return `  ${name}\t${str(m.id)}\t${role}\t${peers}`;
  });
  return [head, ...lines].join('\n');
}

function summarizeHealth(body: Record<string, unknown>): string {
  const quorum = record(body.quorum);
  const leader = record(body.leader);
  const members = Array.isArray(body.members) ? body.members.map(record) : [];
  const head =
    `${str(body.status)}: ${str(quorum.healthyVoters)}/${str(quorum.voters)} voters healthy ` +
    `(quorum ${str(quorum.required)}), leader ${str(leader.name) || 'none'}`;
  const lines = members.map((m) => {
    const role = m.isLeader === true ? 'leader' : m.isLearner === true ? 'learner' : 'follower';
    const reach = m.reachable === false ? 'unreachable' : 'reachable';
    const errors = Array.isArray(m.errors) && m.errors.length > 0 ? `\t${m.errors.join('; ')}` : '';
    return `  ${str(m.name) || str(m.id)}\t${role}\t${reach}${errors}`;
  });
  return [head, ...lines].join('\n');
}

function record(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function str(value: unknown): string {
  return value === undefined || value === null ? '' : String(value);
}
