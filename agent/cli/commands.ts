/**
 * The client commands of docs/api.md §7: `join`, `leave`, `promote`, `members`,
 * `health`, `transfer-leader`, and `defragment` (docs/operations/defragmentation.md). Each is one call to a running agent; the exit
 * code says what a script should do next (0 done, 3 call again, 4 call again
 * later, 1 failed, 2 usage), and the output is the agent's JSON answer or, with
 * `--summary` or on a terminal, one line a person reads. Here a parsed command
 * (command-line.ts) becomes its call and its exit code; answer-text.ts words the answer.
 */
import { describeError, errorOf, isNoQuorum, summarize } from './answer-text';
import { AgentAnswer, AgentCallError, AgentClient } from './client';
import { clientUsage, Command } from './client-commands';
import { ParsedCommand, parseCommand, UsageError } from './command-line';
import { renderUsage, renderUsageError } from '../lib/usage';
import { CLI_ANSWER_MARGIN_SECONDS, CLI_CHANGE_SECONDS, CLI_READ_SECONDS, CLI_WAIT_AGAIN_MS } from '../config/timings';

/** Exit codes of the client commands (docs/api.md §7). */
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

/** The HTTP call a parsed command makes. */
export function requestFor(cmd: ParsedCommand): { method: 'GET' | 'POST'; path: string; body?: Record<string, unknown> } {
  const deadline = cmd.timeoutSeconds === undefined ? {} : { timeoutSeconds: cmd.timeoutSeconds };
  const peers = cmd.peerURLs.length === 0 ? {} : { peerURLs: cmd.peerURLs };
  switch (cmd.command) {
    case 'join':
      return {
        method: 'POST',
        path: '/v1/members/join',
        body: { name: cmd.name, ...peers, ...(cmd.wait ? { wait: true } : {}), ...deadline },
      };
    case 'leave':
      return {
        method: 'POST',
        path: '/v1/members/leave',
        body: { name: cmd.name, ...peers, ...(cmd.force ? { force: true } : {}), ...deadline },
      };
    case 'promote':
      return { method: 'POST', path: '/v1/members/promote', body: { name: cmd.name, ...deadline } };
    case 'transfer-leader':
      return { method: 'POST', path: '/v1/leader/transfer', body: { ...(cmd.to === undefined ? {} : { to: cmd.to }), ...deadline } };
    case 'defragment':
      return {
        method: 'POST',
        path: '/v1/maintenance/defragment',
        body: {
          ...(cmd.compact === undefined ? {} : { compact: cmd.compact }),
          ...(cmd.minFragmentation === undefined ? {} : { minFragmentation: cmd.minFragmentation }),
          ...(cmd.minDbSizeBytes === undefined ? {} : { minDbSizeBytes: cmd.minDbSizeBytes }),
          ...(cmd.force ? { force: true } : {}),
          ...deadline,
        },
      };
    case 'backup':
      return { method: 'POST', path: '/v1/backups', body: { ...(cmd.noVerify ? { verify: false } : {}), ...deadline } };
    case 'backups':
      return { method: 'GET', path: '/v1/backups' };
    case 'members':
      return { method: 'GET', path: '/v1/members' };
    case 'recovery':
      return { method: 'GET', path: '/v1/recovery' };
    case 'recover':
      return {
        method: 'POST',
        path: '/v1/recovery',
        body: { from: cmd.from, clusterId: cmd.clusterId, ...(cmd.force ? { force: true } : {}), ...deadline },
      };
    case 'health':
      return { method: 'GET', path: '/v1/health' };
  }
}

/** The exit code for an answer: 0 complete, 3 in progress (202), 4 unsafe, busy or no quorum (call again later), else 1. */
export function exitCodeFor(answer: AgentAnswer): number {
  if (answer.status === 202) return EXIT.inProgress;
  if (answer.status >= 200 && answer.status < 300) return answer.body.complete === false ? EXIT.inProgress : EXIT.complete;
  const code = errorOf(answer.body).code;
  return code === 'unsafe' || code === 'busy' || isNoQuorum(answer.body) ? EXIT.refused : EXIT.failed;
}

/** `defragment --wait` calls again after an answer that says "still running" (202) or "another holds it" (409 busy). */
export function waitAgain(answer: AgentAnswer): boolean {
  return exitCodeFor(answer) === EXIT.inProgress || (answer.status === 409 && errorOf(answer.body).code === 'busy');
}

/** Runs a client command; resolves to its exit code, never rejects. */
export async function runCommand(command: Command, argv: string[], io: CliIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let cmd: ParsedCommand;
  try {
    cmd = parseCommand(command, argv, env, io.isTTY === true);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr(renderUsageError(clientUsage(command), err.message));
    return EXIT.usage;
  }
  if (cmd.help) {
    io.stdout(renderUsage(clientUsage(command)));
    return EXIT.complete;
  }
  const request = requestFor(cmd);
  // The agent answers within the call's deadline (at most 60 s); leave it time to say so itself.
  const waitSeconds =
    (cmd.timeoutSeconds ?? (request.method === 'GET' ? CLI_READ_SECONDS : CLI_CHANGE_SECONDS)) + CLI_ANSWER_MARGIN_SECONDS;
  const client = new AgentClient({ url: cmd.agent, tokenFile: cmd.tokenFile, timeoutMs: waitSeconds * 1000 });
  let answer: AgentAnswer;
  try {
    answer = request.method === 'GET' ? await client.get(request.path) : await client.post(request.path, request.body ?? {});
    // `defragment --wait`: the run goes on in the agent (or in another one: in progress there, or under NOSPACE
    // the runner's, which makes this one busy); each further call waits for it again, up to its deadline.
    while (cmd.wait && command === 'defragment' && waitAgain(answer)) {
      if (!cmd.json) io.stderr(`etcd-lifecycle-agent ${command}: ${summarize(cmd, answer.body)}; waiting\n`);
      await new Promise((resolve) => setTimeout(resolve, CLI_WAIT_AGAIN_MS));
      answer = await client.post(request.path, request.body ?? {});
    }
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
