import { ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { binCommand } from '../../scripts/bin-command';
import { MAIN_JS, ROOT } from '../helpers/built-agent';
import { patience } from '../helpers/eventually';

// The real binary, as the image runs it: the one build's bundle (dist/bin, with dist/proto), copied
// as the Dockerfile copies it into a directory with no node_modules above it, started by node with
// the flags of its first line; so a module the bundle failed to include fails here.
let outDir = '';
let main = '';

/** An environment with nothing inherited but PATH; no stray ETCD_AGENT_* value. */
function baseEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    ETCD_AGENT_MEMBER_NAME: 'etcd-0',
    ETCD_AGENT_ENDPOINTS: 'http://127.0.0.1:1',
    ETCD_AGENT_LOCAL_ENDPOINT: 'http://127.0.0.1:1',
    ...extra,
  };
}

beforeAll(() => {
  outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-image-'));
  for (const part of ['bin', 'proto']) {
    fs.cpSync(path.join(ROOT, 'dist', part), path.join(outDir, 'dist', part), { recursive: true });
  }
  main = path.join(outDir, 'dist', 'bin', path.basename(MAIN_JS));
  expect(fs.existsSync(main)).toBe(true);
});

afterAll(() => {
  fs.rmSync(outDir, { recursive: true, force: true });
});

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs the binary to its end (killed after `timeoutMs`). */
function run(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 10_000): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const [node, argv] = binCommand(main, args);
    execFile(node, argv, { env, timeout: timeoutMs }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
      if (err !== null && code === null && err.signal === null) reject(err);
      else resolve({ code, signal: err?.signal ?? null, stdout, stderr, ms: Date.now() - started });
    });
  });
}

describe('serve with a bad configuration value', () => {
  // [what is wrong, argv after `serve`, extra environment, the variable the line names]
  it.each<[string, string[], Record<string, string>, string]>([
    ['ETCD_AGENT_LISTEN has no port', [], { ETCD_AGENT_LISTEN: '3501' }, 'ETCD_AGENT_LISTEN'],
    ['--listen has a port above 65535', ['--listen', 'host:99999'], {}, 'ETCD_AGENT_LISTEN'],
    ['--health-max-age-ms is below its range', ['--health-max-age-ms=10'], {}, 'ETCD_AGENT_HEALTH_MAX_AGE_MS'],
    ['ETCD_AGENT_MEMBER_NAME is no DNS name', [], { ETCD_AGENT_MEMBER_NAME: 'Etcd_0' }, 'ETCD_AGENT_MEMBER_NAME'],
    ['ETCD_AGENT_TOKEN_FILE does not exist', [], { ETCD_AGENT_TOKEN_FILE: '/nonexistent/agent-token' }, 'ETCD_AGENT_TOKEN_FILE'],
    ['ETCD_AGENT_LEARNER_FIRST is no boolean', [], { ETCD_AGENT_LEARNER_FIRST: 'maybe' }, 'ETCD_AGENT_LEARNER_FIRST'],
    ['--log-level is unknown', ['--log-level', 'loud'], {}, 'ETCD_AGENT_LOG_LEVEL'],
    ['--listen has no value', ['--listen'], {}, 'ETCD_AGENT_LISTEN'],
    [
      'ETCD_AGENT_ETCD_CA_FILE holds no certificate',
      [],
      { ETCD_AGENT_ETCD_CA_FILE: path.join(ROOT, 'package.json') },
      'ETCD_AGENT_ETCD_CA_FILE',
    ],
  ])('when %s, then it exits 2 with one line naming the variable', async (_what, argv, env, variable) => {
    const exit = await run(['serve', ...argv], baseEnv(env));

    expect(exit.code).toBe(2);
    expect(exit.stdout).toBe('');
    expect(exit.stderr.endsWith('\n')).toBe(true);
    const lines = exit.stderr.slice(0, -1).split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^etcd-lifecycle-agent serve: invalid configuration: ${variable}: \\S`));
  });
});

interface Serving {
  child: ChildProcess;
  /** Every line the process printed on stdout so far, parsed (each must be JSON). */
  lines: Array<Record<string, unknown>>;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with the first line whose `message` is `message` (already printed or still to come). */
  waitFor(message: string, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** The `listening` line. */
  listening: Record<string, unknown>;
}

const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** Starts `serve` and resolves once it logged its `listening` line (within 5 s). */
async function serve(argv: string[]): Promise<Serving> {
  const [node, args] = binCommand(main, ['serve', ...argv]);
  const child = spawn(node, args, { env: baseEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  const lines: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  let stderr = '';
  let buffered = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    const complete = buffered.split('\n');
    buffered = complete.pop() ?? '';
    // A line that is not JSON throws here and fails the test: logs are one JSON object per line.
    for (const line of complete) lines.push(JSON.parse(line) as Record<string, unknown>);
    waiters.forEach((check) => check());
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const waitFor = (message: string, timeoutMs = patience(15000)): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no "${message}" line within ${timeoutMs} ms; stdout: ${JSON.stringify(lines)} stderr: ${stderr}`)),
        timeoutMs,
      );
      const check = (): void => {
        const found = lines.find((l) => l.message === message);
        if (found === undefined) return;
        clearTimeout(timer);
        resolve(found);
      };
      waiters.push(check);
      check();
      void exited.then((e) => reject(new Error(`exited (${e.code ?? e.signal}) before "${message}"; stderr: ${stderr}`)));
    });
  const listening = await waitFor('listening');
  return { child, lines, stderr: () => stderr, exited, waitFor, listening };
}

describe('serve against an unreachable etcd', () => {
  it('when it listens on 127.0.0.1:0, then its JSON log line gives the address and it answers /readyz and /livez', async () => {
    const { listening, child, exited } = await serve(['--listen', '127.0.0.1:0']);

    expect(listening).toMatchObject({ level: 'info', message: 'listening', member: 'etcd-0', endpoints: ['http://127.0.0.1:1'] });
    const address = String(listening.address);
    expect(address).toMatch(/^127\.0\.0\.1:\d+$/);
    const port = Number(address.split(':')[1]);
    expect(port).toBeGreaterThan(0);
    expect(listening.url).toBe(`http://127.0.0.1:${port}`);
    for (const route of ['/readyz', '/livez']) {
      const res = await fetch(`http://${address}${route}`);
      expect({ route, status: res.status, body: await res.json() }).toEqual({ route, status: 200, body: { status: 'ok' } });
    }

    child.kill('SIGTERM');
    expect(await exited).toEqual({ code: 0, signal: null });
  });

  it.each<[string, NodeJS.Signals[]]>([
    ['SIGTERM', ['SIGTERM']],
    ['SIGINT', ['SIGINT']],
    ['SIGTERM twice', ['SIGTERM', 'SIGTERM']],
    ['SIGINT, then SIGTERM', ['SIGINT', 'SIGTERM']],
  ])('when it gets %s, then it exits 0 within 5 s', async (_what, signals) => {
    const running = await serve(['--listen=127.0.0.1:0']);
    // An open keep-alive connection must not hold the shutdown up.
    const res = await fetch(`http://${String(running.listening.address)}/livez`);
    expect(res.status).toBe(200);

    const sent = Date.now();
    running.child.kill(signals[0]);
    if (signals.length > 1) {
      // The second signal comes while the shutdown runs, as a second Ctrl-C or a supervisor's repeat would.
      await running.waitFor('stopping');
      running.child.kill(signals[1]);
    }
    const exit = await running.exited;
    const ms = Date.now() - sent;

    expect(exit).toEqual({ code: 0, signal: null });
    expect(ms).toBeLessThan(5000);
    expect(running.lines.filter((l) => l.message === 'stopping')).toEqual([expect.objectContaining({ level: 'info', signal: signals[0] })]);
    expect(running.stderr()).toBe('');
    // Serving again on the same port proves the old server let go of it.
    const port = String(running.listening.address).split(':')[1];
    const again = await serve([`--listen=127.0.0.1:${port}`]);
    expect(again.listening.address).toBe(`127.0.0.1:${port}`);
    again.child.kill('SIGTERM');
    expect(await again.exited).toEqual({ code: 0, signal: null });
  });

  it('when a request is still in flight at SIGTERM, then it is cut and the process exits 0 within 5 s', async () => {
    const running = await serve(['--listen=127.0.0.1:0']);
    const [host, port] = String(running.listening.address).split(':');
    // A POST whose body never finishes: the server waits for it until the grace period ends.
    const socket = net.connect(Number(port), host);
    await new Promise((resolve) => socket.once('connect', resolve));
    await new Promise((resolve) =>
      socket.write(
        'POST /v1/members/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"na',
        resolve,
      ),
    );
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.on('error', () => undefined);
    // The server has read what was sent before: a whole request on a second connection, sent after
    // it, has been answered.
    expect((await fetch(`http://${host}:${port}/livez`)).status).toBe(200);

    const sent = Date.now();
    running.child.kill('SIGTERM');
    const exit = await running.exited;
    const ms = Date.now() - sent;
    await closed;

    expect(exit).toEqual({ code: 0, signal: null });
    expect(ms).toBeLessThan(5000);
  });
});
