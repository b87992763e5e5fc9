/**
 * The `kube-inject` command: its flags, the file or standard input it reads, and its exit code
 * (0 done, 2 usage, 1 unreadable or invalid YAML); the injection itself is kube-inject.ts's. A value
 * of the input that Pod Security "restricted" refuses is a warning on stderr, one line each, and the
 * YAML is printed all the same (exit 0).
 */
import { readFile as readFileFromDisk } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { firstLine, kubeInject } from './kube-inject';
import { KubeInjectUsageError } from './kube-inject-host-network';
import { InjectOptions, KUBE_INJECT_USAGE, resolveInjectOptions } from './kube-inject-options';
import { PROGRAM, renderUsage, renderUsageError } from '../lib/usage';

/** The streams and file access runKubeInject uses; tests pass their own. */
export interface KubeInjectIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  /** Reads a file, or standard input for `-`; defaults to the file system and process.stdin. */
  readFile?: (path: string) => Promise<string>;
}

/**
 * Runs `kube-inject` with `argv` (the arguments after the command name; a leading `kube-inject`
 * is skipped) and prints the result. Exit code 0 on success, 2 for a usage error (no `-f`, an
 * unknown or invalid flag, a host-network pod without `--token-secret`), 1 when the file cannot
 * be read or is not valid YAML.
 */
export async function runKubeInject(argv: string[], io: KubeInjectIo): Promise<number> {
  const args = argv[0] === 'kube-inject' ? argv.slice(1) : argv;
  let values: {
    filename?: string;
    image?: string;
    port?: string;
    'token-secret'?: string;
    'host-network-listen'?: string;
    help?: boolean;
  };
  try {
    ({ values } = parseArgs({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        filename: { type: 'string', short: 'f' },
        image: { type: 'string' },
        port: { type: 'string' },
        'token-secret': { type: 'string' },
        'host-network-listen': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    return usageError(io, errorMessage(error));
  }
  if (values.help === true) {
    io.stdout(renderUsage(KUBE_INJECT_USAGE));
    return 0;
  }
  if (values.filename === undefined || values.filename === '') {
    return usageError(io, 'missing -f FILE (use - for stdin)');
  }
  if (values.port !== undefined && !/^\d+$/.test(values.port)) {
    return usageError(io, `--port must be a number, got "${values.port}"`);
  }

  const options: Partial<InjectOptions> = {
    image: values.image,
    port: values.port === undefined ? undefined : Number(values.port),
    tokenSecret: values['token-secret'],
    hostNetworkListen: values['host-network-listen'],
  };
  try {
    resolveInjectOptions(options);
  } catch (error) {
    return usageError(io, errorMessage(error));
  }

  const file = values.filename;
  const source = file === '-' ? 'stdin' : file;
  let text: string;
  try {
    text = await (io.readFile ?? readFileOrStdin)(file);
  } catch (error) {
    io.stderr(`${PROGRAM} kube-inject: cannot read ${source}: ${firstLine(errorMessage(error))}\n`);
    return 1;
  }
  try {
    const warnings: string[] = [];
    const output = kubeInject(text, options, (line) => warnings.push(line));
    for (const line of warnings) io.stderr(`${PROGRAM} kube-inject: warning: ${source}: ${line}\n`);
    io.stdout(output);
  } catch (error) {
    if (error instanceof KubeInjectUsageError) return usageError(io, `${source}: ${error.message}`);
    io.stderr(`${PROGRAM} kube-inject: ${source}: ${firstLine(errorMessage(error))}\n`);
    return 1;
  }
  return 0;
}

function usageError(io: KubeInjectIo, message: string): number {
  io.stderr(renderUsageError(KUBE_INJECT_USAGE, firstLine(message)));
  return 2;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function readFileOrStdin(path: string): Promise<string> {
  if (path !== '-') return readFileFromDisk(path, 'utf8');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks).toString('utf8');
}
