/**
 * Bad input to `serve` and `prepare` is one line naming the variable and exit code 2, whatever the
 * path is wrong about: missing, a directory where a file belongs, a file where a directory belongs,
 * a path through a file, unreadable or unwritable. Each path setting is tried that way,
 * through the built binary. "Unreadable" is a file of mode 600 read by the user nobody when the test
 * runs as root (root reads everything), else a file of mode 000 read by its owner.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FILE_SETTINGS } from '../../agent/config/settings';
import { runCli, type Ran } from '../helpers/run-process';

const runsAsRoot = process.getuid?.() === 0;
/** Whom the "cannot be read or written" cases run as: nobody when this is root, else this user. */
const OTHER = runsAsRoot ? { uid: 65534, gid: 65534 } : {};

let root: string;
/** A regular file, a directory, a file and a directory OTHER may not read, a directory OTHER may not write. */
let file: string;
let dir: string;
let secret: string;
let closed: string;
let readOnly: string;
/** A directory everyone may write in (the valid data directory of the prepare cases). */
let open: string;

beforeAll(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'bad-paths-'));
  fs.chmodSync(root, 0o755);
  file = path.join(root, 'a-file');
  fs.writeFileSync(file, 'token\n');
  dir = path.join(root, 'a-dir');
  fs.mkdirSync(dir);
  secret = path.join(root, 'secret');
  fs.writeFileSync(secret, 'token\n');
  fs.chmodSync(secret, runsAsRoot ? 0o600 : 0o000);
  closed = path.join(root, 'closed');
  fs.mkdirSync(closed);
  fs.chmodSync(closed, runsAsRoot ? 0o700 : 0o000);
  readOnly = path.join(root, 'read-only');
  fs.mkdirSync(readOnly);
  fs.chmodSync(readOnly, 0o555);
  open = path.join(root, 'open');
  fs.mkdirSync(open, { mode: 0o777 });
  fs.chmodSync(open, 0o777);
});

afterAll(() => {
  for (const p of [secret, closed, readOnly]) fs.chmodSync(p, 0o700);
  fs.rmSync(root, { recursive: true, force: true });
});

/** Exit 2 and exactly one line on stderr, naming `variable`, nothing on stdout. */
function expectOneLine(ran: Ran, command: string, variable: string): void {
  expect(ran.stdout).toBe('');
  expect(ran.stderr).toMatch(new RegExp(`^etcd-lifecycle-agent ${command}: invalid configuration: ${variable}: [^\\n]+\\n$`));
  expect(ran.code).toBe(2);
}

/** The ways a file path can be wrong, with the words the line says it in. */
const fileCases = (): Array<[string, string, RegExp, boolean]> => [
  ['missing', path.join(root, 'missing'), /does not exist/, false],
  ['a directory', dir, /is a directory, not a file/, false],
  ['a path through a file', path.join(file, 'below'), /a part of its path is a file/, false],
  ['unreadable', secret, /cannot be read \(permission denied\)/, true],
];

const prepareBase = (): NodeJS.ProcessEnv => ({
  ETCD_AGENT_MEMBER_NAME: 'etcd-0',
  ETCD_AGENT_PEER_URL: 'http://127.0.0.1:2380',
  ETCD_AGENT_DATA_DIR: path.join(open, 'default.etcd'),
  ETCD_AGENT_PREPARE_FLAGS_FILE: path.join(open, 'run', 'etcd-flags.sh'),
});

describe.each(['serve', 'prepare'])('%s with a bad path in a file setting', (command) => {
  const base = (): NodeJS.ProcessEnv => (command === 'prepare' ? prepareBase() : { ETCD_AGENT_LISTEN: '127.0.0.1:0' });

  it.each(FILE_SETTINGS.flatMap((variable) => [0, 1, 2, 3].map((n) => [variable, n] as const)))(
    'when %s is case %i (missing, a directory, a path through a file, unreadable), then exit 2 with one line naming it',
    async (variable, n) => {
      const [, value, words, asOther] = fileCases()[n];

      const ran = await runCli([command], { ...base(), [variable]: value }, asOther ? OTHER : {});

      expectOneLine(ran, command, variable);
      expect(ran.stderr).toMatch(words);
    },
  );
});

describe('prepare with a bad data directory or flags file', () => {
  it.each<[string, string, () => NodeJS.ProcessEnv, RegExp, boolean]>([
    [
      'ETCD_AGENT_DATA_DIR is a regular file (the issue)',
      'ETCD_AGENT_DATA_DIR',
      () => ({ ETCD_AGENT_DATA_DIR: file }),
      /is a file, not a directory/,
      false,
    ],
    [
      'ETCD_AGENT_DATA_DIR is below a file',
      'ETCD_AGENT_DATA_DIR',
      () => ({ ETCD_AGENT_DATA_DIR: path.join(file, 'default.etcd') }),
      /a part of its path is a file/,
      false,
    ],
    [
      'ETCD_AGENT_DATA_DIR is in a volume that is missing',
      'ETCD_AGENT_DATA_DIR',
      () => ({ ETCD_AGENT_DATA_DIR: path.join(root, 'no-volume', 'default.etcd') }),
      /the directory above it, .* does not exist/,
      false,
    ],
    [
      'ETCD_AGENT_DATA_DIR cannot be read',
      'ETCD_AGENT_DATA_DIR',
      () => ({ ETCD_AGENT_DATA_DIR: closed }),
      /cannot be read and written \(permission denied\)/,
      true,
    ],
    [
      '--data-dir (the flag) is a regular file',
      'ETCD_AGENT_DATA_DIR',
      () => ({ ETCD_AGENT_DATA_DIR: undefined, FLAG: `--data-dir=${file}` }),
      /is a file, not a directory/,
      false,
    ],
    [
      'ETCD_AGENT_PREPARE_FLAGS_FILE is a directory',
      'ETCD_AGENT_PREPARE_FLAGS_FILE',
      () => ({ ETCD_AGENT_PREPARE_FLAGS_FILE: dir }),
      /is a directory, not a file/,
      false,
    ],
    [
      'ETCD_AGENT_PREPARE_FLAGS_FILE is below a file',
      'ETCD_AGENT_PREPARE_FLAGS_FILE',
      () => ({ ETCD_AGENT_PREPARE_FLAGS_FILE: path.join(file, 'run', 'flags.sh') }),
      /is a file, not a directory/,
      false,
    ],
    [
      'ETCD_AGENT_PREPARE_FLAGS_FILE cannot be written',
      'ETCD_AGENT_PREPARE_FLAGS_FILE',
      () => ({ ETCD_AGENT_PREPARE_FLAGS_FILE: path.join(readOnly, 'flags.sh') }),
      /cannot be written \(permission denied\)/,
      true,
    ],
  ])('when %s, then exit 2 with one line naming it', async (_what, variable, env, words, asOther) => {
    const { FLAG, ...values } = { ...prepareBase(), ...env() };

    const ran = await runCli(['prepare', ...(FLAG === undefined ? [] : [FLAG])], values, asOther ? OTHER : {});

    expectOneLine(ran, 'prepare', variable);
    expect(ran.stderr).toMatch(words);
  });
});
