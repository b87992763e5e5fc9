/**
 * The etcd start script prepare installs (prepare/start-script.ts), run for real as the etcd
 * container's command runs it (`sh etcd-start <etcd's binary> <etcd's arguments>`): under Debian's
 * static busybox copied as `sh` with no PATH and no other file (as in the etcd container, whose image
 * has no shell and no tools), and under dash (any POSIX sh). etcd is played by a small script that
 * notes its arguments and its signals.
 */
import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { flagLine } from '../../agent/prepare/etcd-control';
import { etcdStartScript, installStartScript, startScriptPath } from '../../agent/prepare/start-script';
import { BUSYBOX } from '../helpers/prepare-pods';

jest.setTimeout(20_000);

interface Shell {
  name: string;
  /** The shell binary, as etcd's command names it. */
  setup: (dir: string) => string;
  env: NodeJS.ProcessEnv;
}

const SHELLS: Shell[] = [
  {
    name: 'busybox copied as sh, no PATH',
    setup: (dir) => {
      if (!fs.existsSync(BUSYBOX))
        throw new Error(`${BUSYBOX} is missing: apt-get install busybox-static (scripts/setup.sh and .ci/run do)`);
      const sh = path.join(dir, 'run', 'sh');
      fs.copyFileSync(BUSYBOX, sh);
      fs.chmodSync(sh, 0o755);
      return sh;
    },
    env: {},
  },
  { name: 'dash', setup: () => '/bin/dash', env: { PATH: '/usr/bin:/bin' } },
];

async function until<T>(what: string, fn: () => T | undefined, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = fn();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe.each(SHELLS)('the etcd start script under $name', (shell) => {
  let dir: string;
  let run: string;
  let data: string;
  let sh: string;
  let script: ChildProcess | undefined;
  let exited: Promise<number | null>;
  let stderr = '';

  const file = (name: string): string => path.join(run, name);
  const read = (name: string): string | undefined => (fs.existsSync(file(name)) ? fs.readFileSync(file(name), 'utf8') : undefined);
  /** Each start of the fake etcd: its arguments, one line per start. */
  const starts = (): string[] => (read('starts') ?? '').split('\n').filter(Boolean);
  const state = (): string => (read('etcd-state') ?? '').trim();
  const writeFlags = (name: string, flags: string[]): void =>
    fs.writeFileSync(file(name), `# a comment\n\n${flags.map(flagLine).join('\n')}\n`);

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'start-script-'));
    run = path.join(dir, 'run');
    data = path.join(dir, 'volume', 'default.etcd');
    fs.mkdirSync(run);
    fs.mkdirSync(data, { recursive: true });
    fs.writeFileSync(path.join(data, 'wal'), 'x');
    sh = shell.setup(dir);
    // The fake etcd: notes its arguments; on SIGTERM it exits with the code in `term-code`, or, when
    // there is none, dies of the signal as etcd does once it has shut down (it re-raises it: status
    // 143); unasked it exits with the code in `exit-code` when that appears.
    fs.writeFileSync(
      file('etcd'),
      [
        `#!${sh}`,
        // The trap first: a test that sees the start may signal at once.
        `trap 'echo TERM >> ${file('signals')}; if [ -e ${file('term-code')} ]; then read -r c < ${file('term-code')}; exit "$c"; fi; trap - TERM; kill -TERM $$' TERM`,
        `echo "$*" >> ${file('starts')}`,
        `while [ ! -e ${file('exit-code')} ] && [ -e ${run} ]; do sleep 0.05; done`,
        `read -r c < ${file('exit-code')}; exit "$c"`,
        '',
      ].join('\n'),
    );
    fs.chmodSync(file('etcd'), 0o755);
    writeFlags('etcd-flags.sh', ['--initial-cluster=a=http://a:2380', '--initial-cluster-state=existing', '--initial-cluster-token=tok']);
    stderr = '';
  });

  afterEach(async () => {
    // The script and the fake etcd are one process group: kill both, whatever the test left running.
    if (script?.pid !== undefined) {
      try {
        process.kill(-script.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      await exited;
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Runs the script as the etcd container's command does: installed beside the flags file, etcd's binary its first argument. */
  function start(args = [file('etcd'), '--name=a', '--data-dir=x']): void {
    const installed = installStartScript(file('etcd-flags.sh'), data);
    const child = spawn(sh, [installed, ...args], {
      env: shell.env,
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: true,
    });
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    script = child;
    exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  it("when it starts, then etcd gets its own arguments and then the flags file's, and the state names its pid", async () => {
    start();
    const [args] = await until('the first start', () => (starts().length > 0 ? starts() : undefined));
    expect(args).toBe(
      '--name=a --data-dir=x --initial-cluster=a=http://a:2380 --initial-cluster-state=existing --initial-cluster-token=tok',
    );
    // etcd (its own child) may note its start before the script has written the state.
    await until('the running state', () => /^running \d+$/.test(state()));
  });

  it.each([
    ['a command, which is never run', 'touch PWNED'],
    ['a flag that is not allowed', `set -- "$@" '--data-dir=/elsewhere'`],
    ['--force-new-cluster outside the one-shot file', `set -- "$@" '--force-new-cluster'`],
    ['an allowed flag followed by a command', `set -- "$@" '--initial-cluster-token=t'; touch PWNED`],
    ['a quote inside a value', `set -- "$@" '--initial-cluster-token=a'\\''b'`],
  ])('when the flags file holds %s, then etcd is not started and the script exits 2 naming the line', async (_what, line) => {
    fs.appendFileSync(file('etcd-flags.sh'), `${line.replace('PWNED', file('PWNED'))}\n`);
    start();
    expect(await exited).toBe(2);
    expect(starts()).toEqual([]);
    expect(fs.existsSync(file('PWNED'))).toBe(false);
    expect(stderr).toContain('refused line');
  });

  it('when a one-shot flags file waits, then the next start alone uses it: renamed before, and the state says so', async () => {
    writeFlags('etcd-flags-once.sh', ['--force-new-cluster']);
    start();
    await until('the first start', () => starts().length === 1);
    expect(starts()[0]).toMatch(/--initial-cluster-token=tok --force-new-cluster$/);
    expect(read('etcd-flags-once.sh')).toBeUndefined();
    expect(read('etcd-flags-once.sh.used')).toContain('--force-new-cluster');
    await until('the running-once state', () => /^running \d+ once$/.test(state()));
    fs.writeFileSync(file('etcd-restart'), 'r1\n');
    await until('the second start', () => starts().length === 2);
    expect(starts()[1]).not.toContain('--force-new-cluster');
    await until('the plain state', () => /^running \d+$/.test(state()));
    expect(read('signals')).toBe('TERM\n');
  });

  it('when held, then etcd is stopped with SIGTERM and not started; the data directory moves only to a .removed- sibling; released, it starts again', async () => {
    start();
    await until('the first start', () => starts().length === 1);
    fs.writeFileSync(file('etcd-hold'), 'n1\n');
    fs.writeFileSync(file('etcd-restart'), 'n1\n');
    await until('held', () => state() === 'held n1');
    expect(read('signals')).toBe('TERM\n');
    for (const bad of [path.join(dir, 'elsewhere'), `${data}.removed-x/../../escape`]) {
      fs.writeFileSync(file('etcd-move-aside'), `${bad}\n`);
      await until('the request read', () => !fs.existsSync(file('etcd-move-aside')));
      expect(fs.existsSync(data)).toBe(true);
    }
    fs.writeFileSync(file('etcd-move-aside'), `${data}.removed-20261201T120000Z\n`);
    await until('the move', () => !fs.existsSync(data));
    expect(fs.readFileSync(path.join(`${data}.removed-20261201T120000Z`, 'wal'), 'utf8')).toBe('x');
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(starts()).toHaveLength(1);
    fs.rmSync(file('etcd-hold'));
    await until('the start after the hold', () => starts().length === 2);
    await until('the running state', () => /^running \d+$/.test(state()));
  });

  it.each<{ signal: NodeJS.Signals; etcd: string; code: number }>([
    { signal: 'SIGTERM', etcd: 'dying of SIGTERM (status 143, as etcd does)', code: 0 },
    { signal: 'SIGTERM', etcd: 'exit 0', code: 0 },
    { signal: 'SIGINT', etcd: 'dying of SIGTERM (status 143, as etcd does)', code: 0 },
    { signal: 'SIGTERM', etcd: 'exit 2 (a crash while it stops)', code: 2 },
  ])(
    'when the container is stopped ($signal to the script) and etcd then ends by $etcd, then etcd got SIGTERM and the script exits $code',
    async ({ signal, etcd, code }) => {
      const exit = /^exit (\d+)/.exec(etcd)?.[1];
      if (exit !== undefined) fs.writeFileSync(file('term-code'), `${exit}\n`);
      start();
      await until('the first start', () => starts().length === 1);
      await until('the running state', () => /^running \d+$/.test(state()));
      script?.kill(signal);
      expect(await exited).toBe(code);
      expect(read('signals')).toBe('TERM\n');
      expect(starts()).toHaveLength(1);
    },
  );

  it('when the container is stopped while etcd is held, then the script exits 0 without starting etcd', async () => {
    start();
    await until('the first start', () => starts().length === 1);
    fs.writeFileSync(file('etcd-hold'), 'n1\n');
    fs.writeFileSync(file('etcd-restart'), 'n1\n');
    await until('held', () => state() === 'held n1');
    script?.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(starts()).toHaveLength(1);
  });

  it.each([3, 0, 143])(
    "when etcd exits %i unasked, then the script exits with etcd's status (the kubelet restarts the container)",
    async (code) => {
      start();
      await until('the first start', () => starts().length === 1);
      // Renamed into place: the fake etcd reads the file as soon as it exists, and a file written in
      // place could be read empty (`exit ""`, status 2).
      fs.writeFileSync(file('exit-code.tmp'), `${code}\n`);
      fs.renameSync(file('exit-code.tmp'), file('exit-code'));
      expect(await exited).toBe(code);
      expect(starts()).toHaveLength(1);
    },
  );

  it('when it is given no etcd binary, then it starts nothing and exits 2 saying what it needs', async () => {
    start([]);
    expect(await exited).toBe(2);
    expect(stderr).toContain("the first argument must be etcd's binary");
    expect(starts()).toEqual([]);
  });
});

describe('installing the start script', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'start-install-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('when prepare installs it, then it is etcd-start beside the flags file, mode 0755, the rendered script, and nothing else is left there', () => {
    const flags = path.join(dir, 'run', 'etcd-flags.sh');
    const data = path.join(dir, 'volume', 'default.etcd');
    const old = process.umask(0o077);
    try {
      expect(installStartScript(flags, data)).toBe(path.join(dir, 'run', 'etcd-start'));
    } finally {
      process.umask(old);
    }
    expect(startScriptPath(flags)).toBe(path.join(dir, 'run', 'etcd-start'));
    expect(fs.statSync(startScriptPath(flags)).mode & 0o7777).toBe(0o755);
    expect(fs.readFileSync(startScriptPath(flags), 'utf8')).toBe(etcdStartScript(flags, data));
    expect(fs.readdirSync(path.join(dir, 'run'))).toEqual(['etcd-start']);
  });

  it('when it is installed again over an older script, then the file is replaced whole (a new inode), not rewritten in place', () => {
    const flags = path.join(dir, 'etcd-flags.sh');
    fs.writeFileSync(startScriptPath(flags), 'echo old\n');
    const before = fs.statSync(startScriptPath(flags)).ino;
    installStartScript(flags, path.join(dir, 'data'));
    expect(fs.statSync(startScriptPath(flags)).ino).not.toBe(before);
    expect(fs.readFileSync(startScriptPath(flags), 'utf8')).toBe(etcdStartScript(flags, path.join(dir, 'data')));
  });
});
