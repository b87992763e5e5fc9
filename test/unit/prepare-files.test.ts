import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '../../agent/config/config';
import { moveAside, readDataDir, readWalMetadata } from '../../agent/etcd-data/data-dir';
import { loadPrepareOptions, parseInitialCluster } from '../../agent/prepare/options';
import { flagsFileContent } from '../../agent/prepare/start-files';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prepare-files-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** One WAL frame: 8-byte little-endian length (padding flagged in the top byte), the record, the padding. */
function frame(record: Buffer): Buffer {
  const pad = (8 - (record.length % 8)) % 8;
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(record.length) | (pad === 0 ? 0n : BigInt(0x80 | pad) << 56n));
  return Buffer.concat([len, record, Buffer.alloc(pad)]);
}

function varint(n: bigint): Buffer {
  const out: number[] = [];
  do {
    let b = Number(n & 0x7fn);
    n >>= 7n;
    if (n > 0n) b |= 0x80;
    out.push(b);
  } while (n > 0n);
  return Buffer.from(out);
}

function walHead(memberId: bigint, clusterId: bigint): Buffer {
  const meta = Buffer.concat([Buffer.from([0x08]), varint(memberId), Buffer.from([0x10]), varint(clusterId)]);
  const crc = Buffer.from([0x08, 0x04, 0x10, 0x00]);
  const metadata = Buffer.concat([Buffer.from([0x08, 0x01, 0x1a]), varint(BigInt(meta.length)), meta]);
  return Buffer.concat([frame(crc), frame(metadata)]);
}

describe('readDataDir', () => {
  it.each([
    ['missing', (d: string) => void d, { kind: 'empty' }],
    ['empty', (d: string) => fs.mkdirSync(d), { kind: 'empty' }],
    [
      'only the bootstrap marker',
      (d: string) => (fs.mkdirSync(d), fs.writeFileSync(path.join(d, 'etcd-lifecycle-agent-bootstrap.json'), '{}')),
      { kind: 'empty' },
    ],
    [
      'a WAL',
      (d: string) => {
        fs.mkdirSync(path.join(d, 'member', 'wal'), { recursive: true });
        fs.writeFileSync(
          path.join(d, 'member', 'wal', '0000000000000000-0000000000000000.wal'),
          walHead(0xbdae9bbc11dd390dn, 0xd1cfaf999eb97a2an),
        );
      },
      { kind: 'member', memberId: 'bdae9bbc11dd390d', clusterId: 'd1cfaf999eb97a2a' },
    ],
    [
      'a WAL preallocated to 64 MB, as etcd makes each segment',
      (d: string) => {
        fs.mkdirSync(path.join(d, 'member', 'wal'), { recursive: true });
        const file = path.join(d, 'member', 'wal', '0000000000000000-0000000000000000.wal');
        fs.writeFileSync(file, walHead(0xbdae9bbc11dd390dn, 0xd1cfaf999eb97a2an));
        fs.truncateSync(file, 64_000_000);
      },
      { kind: 'member', memberId: 'bdae9bbc11dd390d', clusterId: 'd1cfaf999eb97a2a' },
    ],
    [
      'a WAL whose first frame (100 KiB) ends past the first 64 KiB read',
      (d: string) => {
        fs.mkdirSync(path.join(d, 'member', 'wal'), { recursive: true });
        const big = Buffer.alloc(100 * 1024, 7);
        const first = frame(Buffer.concat([Buffer.from([0x08, 0x04, 0x1a]), varint(BigInt(big.length)), big]));
        fs.writeFileSync(path.join(d, 'member', 'wal', '0000000000000000-0000000000000000.wal'), Buffer.concat([first, walHead(5n, 7n)]));
      },
      { kind: 'member', memberId: '5', clusterId: '7' },
    ],
    [
      'a snapshot database without a WAL',
      (d: string) => (
        fs.mkdirSync(path.join(d, 'member', 'snap'), { recursive: true }),
        fs.writeFileSync(path.join(d, 'member', 'snap', 'db'), 'x')
      ),
      { kind: 'unusable' },
    ],
    [
      'a WAL file that is not one',
      (d: string) => (
        fs.mkdirSync(path.join(d, 'member', 'wal'), { recursive: true }),
        fs.writeFileSync(path.join(d, 'member', 'wal', '0.wal'), 'garbage!garbage!')
      ),
      { kind: 'unusable' },
    ],
  ])('when the data directory is %s, then it reads as %j', (_what, make, expected) => {
    const d = path.join(dir, 'default.etcd');
    make(d);
    expect(readDataDir(d)).toMatchObject(expected);
  });

  it('when bytes are truncated mid-record, then no metadata is read', () => {
    expect(readWalMetadata(walHead(5n, 7n).subarray(0, 20))).toBeUndefined();
  });
});

describe('moveAside', () => {
  it('when a data directory is moved aside twice in one second, then both are kept under dated names', () => {
    const d = path.join(dir, 'default.etcd');
    const at = new Date('2026-12-01T07:00:00.123Z');
    fs.mkdirSync(d);
    fs.writeFileSync(path.join(d, 'a'), '1');
    const first = moveAside(d, at);
    fs.mkdirSync(d);
    const second = moveAside(d, at);
    expect([path.basename(first), path.basename(second)]).toEqual([
      'default.etcd.removed-20261201T070000Z',
      'default.etcd.removed-20261201T070000Z-1',
    ]);
    expect(fs.readFileSync(path.join(first, 'a'), 'utf8')).toBe('1');
    expect(fs.existsSync(d)).toBe(false);
  });
});

describe('flagsFileContent', () => {
  it("when sourced by sh, then etcd's arguments gain exactly the decided flags, quotes and all", () => {
    const file = path.join(dir, 'flags.sh');
    const step = {
      kind: 'start' as const,
      state: 'existing' as const,
      initialCluster: "a=http://x:2380,b'c=http://y:2380",
      reason: "it's $(reboot) `x`",
    };
    fs.writeFileSync(file, flagsFileContent(step, 'tok en', 'a', new Date()));
    const out = execFileSync('/bin/sh', ['-c', `. "$0" && printf '%s\\n' "$@"`, file, '--name=a']).toString();
    expect(out.split('\n').filter(Boolean)).toEqual([
      '--name=a',
      "--initial-cluster=a=http://x:2380,b'c=http://y:2380",
      '--initial-cluster-state=existing',
      '--initial-cluster-token=tok en',
    ]);
  });
});

describe('prepare options', () => {
  const volume = fs.mkdtempSync(path.join(os.tmpdir(), 'prepare-options-'));
  const dataDir = path.join(volume, 'default.etcd');
  const base = { ETCD_AGENT_MEMBER_NAME: 'etcd-1', ETCD_AGENT_DATA_DIR: dataDir, ETCD_AGENT_PEER_URL_TEMPLATE: 'http://{name}.svc:2380' };
  afterAll(() => fs.rmSync(volume, { recursive: true, force: true }));

  it('when the template and data dir are set, then the peer URL comes from the template and the defaults fill the rest', () => {
    const o = loadPrepareOptions(base, []);
    expect(o).toMatchObject({
      self: { name: 'etcd-1', peerURL: 'http://etcd-1.svc:2380' },
      dataDir,
      token: 'etcd-cluster',
      waitSeconds: 60,
      initial: [],
    });
  });

  it('when a flag and its variable differ, then the flag wins', () => {
    const other = path.join(volume, 'e');
    expect(loadPrepareOptions(base, ['--data-dir', other, '--peer-url=http://h:1']).self.peerURL).toBe('http://h:1');
    expect(loadPrepareOptions(base, ['--data-dir', other]).dataDir).toBe(other);
  });

  it.each([
    ['no data directory', { ...base, ETCD_AGENT_DATA_DIR: '' }, [], 'ETCD_AGENT_DATA_DIR'],
    ['no peer URL', { ETCD_AGENT_MEMBER_NAME: 'x', ETCD_AGENT_DATA_DIR: '/d' }, [], 'ETCD_AGENT_PEER_URL_TEMPLATE'],
    ['a data directory that is a file', { ...base, ETCD_AGENT_DATA_DIR: __filename }, [], 'ETCD_AGENT_DATA_DIR'],
    ['a data directory below a file', { ...base, ETCD_AGENT_DATA_DIR: path.join(__filename, 'default.etcd') }, [], 'ETCD_AGENT_DATA_DIR'],
    [
      'a data directory whose volume is missing',
      { ...base, ETCD_AGENT_DATA_DIR: '/nonexistent-volume/default.etcd' },
      [],
      'ETCD_AGENT_DATA_DIR',
    ],
    ['a flags file that is a directory', { ...base, ETCD_AGENT_PREPARE_FLAGS_FILE: os.tmpdir() }, [], 'ETCD_AGENT_PREPARE_FLAGS_FILE'],
    [
      'a flags file below a file',
      { ...base, ETCD_AGENT_PREPARE_FLAGS_FILE: path.join(__filename, 'run', 'flags.sh') },
      [],
      'ETCD_AGENT_PREPARE_FLAGS_FILE',
    ],
    ['a bad wait', { ...base, ETCD_AGENT_PREPARE_WAIT_SECONDS: '0' }, [], 'ETCD_AGENT_PREPARE_WAIT_SECONDS'],
    ['an unknown flag', base, ['--colour'], 'argv'],
  ])('when given %s, then a ConfigError names %s', (_what, env, argv, variable) => {
    expect(() => loadPrepareOptions(env, argv)).toThrow(ConfigError);
    try {
      loadPrepareOptions(env, argv);
    } catch (err) {
      expect((err as ConfigError).variable).toBe(variable);
    }
  });

  it.each([
    [
      'a=http://h:2380,b=http://i:2380',
      [
        { name: 'a', peerURL: 'http://h:2380' },
        { name: 'b', peerURL: 'http://i:2380' },
      ],
    ],
    ['a=http://h:2380,a=http://i:2380', 'twice'],
    ['a', 'name=peerURL'],
    ['a=http://h', 'port'],
  ])('when the initial cluster is %s, then it reads as %j', (value, expected) => {
    if (typeof expected === 'string') expect(() => parseInitialCluster(value)).toThrow(expected);
    else expect(parseInitialCluster(value)).toEqual(expected);
  });
});
