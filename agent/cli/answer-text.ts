/**
 * The agent's answer in words: one line for an error, a short summary of a success (`--summary`,
 * or on a terminal). Only reads the answer's JSON; what a command does next is commands.ts's.
 */
import type { AgentAnswer } from './client';
import type { ParsedCommand } from './command-line';

/** One line for an error answer: `unsafe: removing … (refused; call again later)`. */
export function describeError(answer: AgentAnswer): string {
  const { code, message } = errorOf(answer.body);
  const hint = code === 'unsafe' || code === 'busy' ? ' (refused; call again later)' : isNoQuorum(answer.body) ? ' (call again later)' : '';
  return `${code ?? `HTTP ${answer.status}`}: ${message ?? 'no message'}${hint}`;
}

/**
 * True for the `unavailable` of a lost quorum: it carries the quorum figures in `details`
 * (`voters`, `healthyVoters`, `required`), as the agent's no-quorum answer does (membership/quorum-verdict.ts).
 */
export function isNoQuorum(body: Record<string, unknown>): boolean {
  if (errorOf(body).code !== 'unavailable') return false;
  const details = (body.error as { details?: unknown }).details;
  if (typeof details !== 'object' || details === null) return false;
  const { voters, healthyVoters, required } = details as Record<string, unknown>;
  return [voters, healthyVoters, required].every((n) => typeof n === 'number');
}

/** The `error` of an answer's body, its code and message when they are strings. */
export function errorOf(body: Record<string, unknown>): { code?: string; message?: string } {
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
    case 'defragment':
      return summarizeDefragment(body);
    case 'backup': {
      const manifest = record(body.manifest);
      if (body.outcome !== 'created') return `${outcome}: call again`;
      const v = record(body.verification);
      const verdict =
        v.ok === true
          ? `verified: ${str(v.keys)} keys at revision ${str(v.revision)}`
          : v.ok === false
            ? `verification FAILED (${str(v.check)}): ${str(v.error)}`
            : 'not verified';
      return `${str(manifest.name)}: ${str(manifest.sizeBytes)} bytes from ${str(record(manifest.member).name)} at revision ${str(manifest.revision)}, ${verdict}`;
    }
    case 'backups': {
      const list = Array.isArray(body.backups) ? body.backups.map(record) : [];
      return list.length === 0
        ? 'no backups'
        : list.map((b) => `${str(b.name)} ${str(b.state)} ${str(record(b.manifest).sizeBytes)} bytes`).join('\n');
    }
    case 'members':
      return summarizeMembers(body);
    case 'health':
      return summarizeHealth(body);
    case 'recovery': {
      const from = record(body.recoverFrom);
      const head =
        body.needed === true ? (body.possible === true ? 'recovery possible' : 'recovery not possible now') : 'no recovery needed';
      return `${head}: ${str(body.reason)}${from.name === undefined ? '' : `\n  from ${str(from.name)} (committed index ${str(from.committedIndex)}), cluster ${str(body.clusterId)}`}`;
    }
    case 'recover': {
      const rec = record(body.record);
      return body.complete === true
        ? `${outcome}: from ${str(record(rec.from).name)}, writable at ${str(rec.writableAt)}`
        : `${outcome} (step ${str(body.step)}): call again`;
    }
  }
}

function summarizeDefragment(body: Record<string, unknown>): string {
  const run = record(body.run);
  const members = Array.isArray(body.members) ? body.members.map(record) : [];
  const alarm = record(body.alarm);
  const done = members.map((m) => {
    const before = record(m.before);
    const after = record(m.after);
    const mb = (v: unknown): string => `${Math.round(Number(v) / 100_000) / 10} MB`;
    return `${str(m.name)}${m.wasLeader === true ? ' (leader, after leadership moved)' : ''} ${mb(before.dbSizeBytes)} → ${mb(after.dbSizeBytes)} in ${str(m.durationMs)} ms`;
  });
  const head =
    str(body.outcome) === 'in-progress'
      ? `in progress in the agent of ${str(run.agent)}: ${str(run.step)} (call again)`
      : `${str(body.outcome)}${alarm.disarmed === true ? ', NOSPACE disarmed' : ''}`;
  return [head, ...done.map((d) => `  ${d}`)].join('\n');
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
