/**
 * How a command says how it is used: one `CommandUsage` per command, declared beside the code that
 * parses that command's arguments, and one way to print it. `--help` and `-h` print a command's own
 * usage (exit 0), a usage error prints the reason and the synopsis (exit 2), and the overview lists
 * every command of the table (command-table.ts). Pure: text in, text out.
 *
 * Invariant: every command's help has the same shape — `usage: etcd-lifecycle-agent <name> <synopsis>`,
 * what it does, its flags and variables (each flag with the variable that sets it when the flag is
 * absent, and its default), then its notes — so a user reads one style everywhere.
 */

/** The program's name, as the package's `bin` installs it. */
export const PROGRAM = 'etcd-lifecycle-agent';

/** One flag and/or environment variable of a command. */
export interface UsageOption {
  /** The flag with its argument, e.g. `--peer-url URL`; absent for a variable without a flag. */
  flag?: string;
  /** The environment variable that sets the value when the flag is absent. */
  variable?: string;
  /** The default, as the help shows it; absent when there is none. */
  default?: string;
  /** What it means, in one sentence (Markdown backticks are dropped). */
  meaning: string;
}

/** How a command is used; `--help` prints it. */
export interface CommandUsage {
  /** The command, as typed after the program's name. */
  name: string;
  /** What follows the name on the command line, e.g. `NAME [--peer-url URL]... [--wait]`. */
  synopsis: string;
  /** What the command does, in one line (also the overview's column). */
  summary: string;
  /** More that a user needs before the flags (optional), one paragraph per entry. */
  details?: readonly string[];
  /** Its flags and variables, in the order the help lists them (`-h, --help` is added). */
  options: readonly UsageOption[];
  /** Lines after the flags: exit codes, where to read more. */
  notes?: readonly string[];
}

const HELP_OPTION: UsageOption = { flag: '-h, --help', meaning: 'print this help and exit 0' };

/** The first line of a command's help, and of its usage errors. */
export function synopsisLine(usage: CommandUsage): string {
  return `usage: ${PROGRAM} ${usage.name}${usage.synopsis === '' ? '' : ` ${usage.synopsis}`}`;
}

/** A command's whole help text (ends with a newline). */
export function renderUsage(usage: CommandUsage): string {
  const lines = [synopsisLine(usage), '', plain(usage.summary)];
  for (const paragraph of usage.details ?? []) lines.push('', plain(paragraph));
  lines.push('', 'flags and variables (a flag wins over its variable):');
  for (const option of [...usage.options, HELP_OPTION]) lines.push(`  ${optionHead(option)}`, `      ${plain(option.meaning)}`);
  if (usage.notes !== undefined && usage.notes.length > 0) lines.push('', ...usage.notes.map(plain));
  return `${lines.join('\n')}\n`;
}

/** A usage error: the reason, then the synopsis and where the rest is (ends with a newline). */
export function renderUsageError(usage: CommandUsage, reason: string): string {
  return `${PROGRAM} ${usage.name}: ${reason}\n${synopsisLine(usage)}\nRun '${PROGRAM} ${usage.name} --help' for its flags and variables.\n`;
}

/** The overview of all commands, for `etcd-lifecycle-agent --help` (ends with a newline). */
export function renderOverview(usages: readonly CommandUsage[]): string {
  const heads = usages.map((u) => `${u.name}${u.synopsis === '' ? '' : ` ${u.synopsis}`}`);
  const width = Math.min(44, Math.max(...heads.map((h) => h.length)));
  const lines = [`usage: ${PROGRAM} <command> [flags]`, '', 'commands:'];
  usages.forEach((u, i) => {
    const head = heads[i];
    lines.push(
      head.length > width ? `  ${head}\n  ${' '.repeat(width)}  ${plain(u.summary)}` : `  ${head.padEnd(width)}  ${plain(u.summary)}`,
    );
  });
  lines.push('', `Run '${PROGRAM} <command> --help' for a command's flags and variables.`);
  return `${lines.join('\n')}\n`;
}

/** True when the arguments ask for help: `--help` or `-h`, before any `--`. */
export function wantsHelp(argv: readonly string[]): boolean {
  for (const arg of argv) {
    if (arg === '--') return false;
    if (arg === '--help' || arg === '-h') return true;
  }
  return false;
}

function optionHead(option: UsageOption): string {
  const names = [option.flag, option.variable].filter((n): n is string => n !== undefined).join(', ');
  return option.default === undefined ? names : `${names} (default: ${plain(option.default)})`;
}

/** Markdown code spans read as plain text on a terminal. */
function plain(text: string): string {
  return text.replace(/`/g, '');
}
