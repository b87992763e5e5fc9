/**
 * Every command answers `--help` and `-h` with its own usage and exits 0, in one style (usage.ts);
 * the table of commands (command-table.ts) is the list, so a command added there is covered here
 * (and, as the built binary, by test/integration/cli.test.ts).
 */
import { COMMANDS, runMain } from '../../agent/cli/command-table';
import { renderOverview, renderUsage, wantsHelp } from '../../agent/lib/usage';

/** Runs `argv` through the command table; answers its exit code and what it printed. */
async function main(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runMain(argv, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s), isTTY: false });
  return { code, stdout, stderr };
}

/** The shape every help has: synopsis, what it does, (paragraphs), flags and variables, (notes). */
const ONE_STYLE =
  /^usage: etcd-lifecycle-agent [a-z-]+( .+)?\n\n[^\n]+\n(\n[^\n]+\n)*\nflags and variables \(a flag wins over its variable\):\n( {2}\S[^\n]*\n {6}\S[^\n]*\n)+(\n([^\n]+\n)+)?$/;

const names = COMMANDS.map((c) => c.usage.name);

describe('--help of every command', () => {
  it('when the table is read, then it holds every command of the contract, each once', () => {
    expect(names).toEqual(
      expect.arrayContaining(['serve', 'prepare', 'kube-inject', 'join', 'leave', 'promote', 'members', 'health', 'transfer-leader']),
    );
    expect(new Set(names).size).toBe(names.length);
  });

  it.each(COMMANDS.flatMap((c) => ['--help', '-h'].map((flag) => [c.usage.name, flag, c] as const)))(
    'when %s %s is run, then it prints its own usage, with each of its flags and variables, and exits 0',
    async (name, flag, command) => {
      const ran = await main([name, flag]);

      expect(ran).toEqual({ code: 0, stdout: renderUsage(command.usage), stderr: '' });
      expect(ran.stdout).toMatch(ONE_STYLE);
      expect(ran.stdout.startsWith(`usage: etcd-lifecycle-agent ${name}`)).toBe(true);
      for (const option of command.usage.options) {
        if (option.flag !== undefined) expect(ran.stdout).toContain(option.flag);
        if (option.variable !== undefined) expect(ran.stdout).toContain(option.variable);
      }
      expect(ran.stdout).toContain('-h, --help');
    },
  );

  it.each(names)('when help %s is run, then it prints the same usage', async (name) => {
    expect((await main(['help', name])).stdout).toBe((await main([name, '--help'])).stdout);
  });

  it.each([
    ['after a positional argument', ['join', 'etcd-3', '--help']],
    ['beside a flag the command does not take', ['leave', '--wait', '-h']],
    ['beside a value serve would refuse', ['serve', '--listen', 'nowhere', '--help']],
    ['beside a missing required value', ['prepare', '--help']],
  ])('when --help comes %s, then it is the help (exit 0), not a usage error', async (_what, argv) => {
    const ran = await main(argv);
    expect(ran.code).toBe(0);
    expect(ran.stdout).toMatch(ONE_STYLE);
    expect(ran.stderr).toBe('');
  });

  it('when the overview is printed (--help, -h, help), then it lists every command with its synopsis and exits 0; without a command it exits 2', async () => {
    for (const argv of [['--help'], ['-h'], ['help']])
      expect(await main(argv)).toEqual({ code: 0, stdout: renderOverview(COMMANDS.map((c) => c.usage)), stderr: '' });
    expect((await main([])).code).toBe(2);
    const overview = renderOverview(COMMANDS.map((c) => c.usage));
    for (const c of COMMANDS) expect(overview).toContain(`  ${c.usage.name}`);
  });

  it('when an unknown command (or help of one) is run, then exit 2 naming it, with the overview', async () => {
    for (const argv of [['frobnicate'], ['help', 'frobnicate']]) {
      const ran = await main(argv);
      expect(ran.code).toBe(2);
      expect(ran.stderr).toMatch(/^etcd-lifecycle-agent: unknown command frobnicate\nusage: etcd-lifecycle-agent <command> \[flags\]\n/);
    }
  });

  it.each<[string[], boolean]>([
    [['--help'], true],
    [['-h'], true],
    [['x', '-h'], true],
    [['--', '--help'], false],
    [['--helpful'], false],
    [[], false],
  ])('when the arguments are %j, then wantsHelp says %s', (argv, wanted) => {
    expect(wantsHelp(argv)).toBe(wanted);
  });
});
