/**
 * Reading a stopped member's log position from its WAL. The segments here are written by a small
 * encoder of etcd's documented record format (8-byte little-endian length with a padding flag,
 * walpb.Record{type, crc, data}, a rolling CRC-32C); real segments of etcd 3.4 to 3.7 are read by
 * test/integration/recovery.test.ts (the plan reads the restarted survivor's log from them).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { crc32c, readWalState, walStateOf } from '../../agent/etcd-data/wal-state';

const TYPE = { metadata: 1, entry: 2, state: 3, crc: 4, snapshot: 5 };

function varint(n: bigint | number): Buffer {
  let v = BigInt(n);
  const out: number[] = [];
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return Buffer.from(out);
}

/** A protobuf message of varint fields (number) and bytes fields (Buffer), by field number. */
function message(fields: Array<[number, number | bigint | Buffer]>): Buffer {
  return Buffer.concat(
    fields.map(([field, value]) =>
      Buffer.isBuffer(value)
        ? Buffer.concat([varint((field << 3) | 2), varint(value.length), value])
        : Buffer.concat([varint(field << 3), varint(value)]),
    ),
  );
}

/** A WAL segment: each record framed and padded as etcd writes it, CRCs rolling from `startCrc`. */
class Segment {
  private digest: number;
  private readonly frames: Buffer[] = [];

  constructor(startCrc = 0) {
    this.digest = startCrc;
    this.frame(
      message([
        [1, TYPE.crc],
        [2, startCrc],
      ]),
    );
  }

  record(type: number, data: Buffer, crc?: number): this {
    this.digest = crc32c(this.digest, data);
    this.frame(
      message([
        [1, type],
        [2, crc ?? this.digest],
        [3, data],
      ]),
    );
    return this;
  }

  metadata(member: bigint, cluster: bigint): this {
    return this.record(
      TYPE.metadata,
      message([
        [1, member],
        [2, cluster],
      ]),
    );
  }

  state(term: number, vote: number, commit: number): this {
    return this.record(
      TYPE.state,
      message([
        [1, term],
        [2, vote],
        [3, commit],
      ]),
    );
  }

  entries(term: number, from: number, to: number): this {
    for (let i = from; i <= to; i++)
      this.record(
        TYPE.entry,
        message([
          [2, term],
          [3, i],
          [4, Buffer.from(`put ${i}`)],
        ]),
      );
    return this;
  }

  snapshot(index: number, term: number): this {
    return this.record(
      TYPE.snapshot,
      message([
        [1, index],
        [2, term],
      ]),
    );
  }

  bytes(tail = Buffer.alloc(0)): Buffer {
    return Buffer.concat([...this.frames, tail]);
  }

  private frame(rec: Buffer): void {
    const pad = (8 - (rec.length % 8)) % 8;
    const len = BigInt(rec.length) | (pad > 0 ? (BigInt(pad) << 56n) | (1n << 63n) : 0n);
    const head = Buffer.alloc(8);
    head.writeBigUInt64LE(len);
    this.frames.push(Buffer.concat([head, rec, Buffer.alloc(pad)]));
  }
}

const MEMBER = 0x8e9e05c52164694dn;
const CLUSTER = 0xcdf818194e3a8c32n;

describe('walStateOf', () => {
  it.each<[string, () => Buffer, { term: number; commit: number; lastIndex: number; lastTerm: number } | undefined]>([
    [
      'states and entries: the last HardState and the last entry',
      () => new Segment().metadata(MEMBER, CLUSTER).state(2, 1, 0).entries(2, 1, 7).state(2, 1, 6).entries(3, 8, 9).state(3, 1, 8).bytes(),
      { term: 3, commit: 8, lastIndex: 9, lastTerm: 3 },
    ],
    [
      "the zero-filled preallocation after the last record (etcd's segments are 64 MiB)",
      () => new Segment().metadata(MEMBER, CLUSTER).state(2, 1, 5).entries(2, 1, 5).bytes(Buffer.alloc(4096)),
      { term: 2, commit: 5, lastIndex: 5, lastTerm: 2 },
    ],
    [
      'a torn last record (a write cut by a crash): read up to it',
      () => {
        const whole = new Segment().metadata(MEMBER, CLUSTER).state(2, 1, 4).entries(2, 1, 4).bytes();
        const longer = new Segment().metadata(MEMBER, CLUSTER).state(2, 1, 4).entries(2, 1, 4).state(2, 1, 9).bytes();
        return Buffer.concat([longer.subarray(0, whole.length + 11), Buffer.alloc(64)]);
      },
      { term: 2, commit: 4, lastIndex: 4, lastTerm: 2 },
    ],
    [
      'a record whose CRC does not match: read up to it, never past it',
      () =>
        new Segment()
          .metadata(MEMBER, CLUSTER)
          .state(2, 1, 3)
          .entries(2, 1, 3)
          .record(
            TYPE.state,
            message([
              [1, 9],
              [3, 99],
            ]),
            12345,
          )
          .entries(9, 4, 5)
          .bytes(),
      { term: 2, commit: 3, lastIndex: 3, lastTerm: 2 },
    ],
    [
      'a segment that continues the rolling CRC of the one before it',
      () => new Segment(0xdeadbeef).metadata(MEMBER, CLUSTER).state(5, 2, 40).entries(5, 41, 42).bytes(),
      { term: 5, commit: 40, lastIndex: 42, lastTerm: 5 },
    ],
    [
      'a snapshot record and no entry after it',
      () => new Segment().metadata(MEMBER, CLUSTER).snapshot(100, 4).state(4, 1, 100).bytes(),
      { term: 4, commit: 100, lastIndex: 100, lastTerm: 4 },
    ],
    ['bytes that are not a WAL', () => Buffer.from('not a write-ahead log at all, just text'), undefined],
  ])('when the segment holds %s, then it reads %j', (_story, bytes, expected) => {
    const state = walStateOf(bytes());
    if (expected === undefined) {
      expect(state).toBeUndefined();
      return;
    }
    expect(state).toMatchObject({ memberId: MEMBER.toString(16), clusterId: CLUSTER.toString(16), ...expected });
  });

  it('when a CRC-32C is computed, then it is Castagnoli\'s (the check value of "123456789" is e3069283)', () => {
    expect(crc32c(0, Buffer.from('123456789')).toString(16)).toBe('e3069283');
    expect(crc32c(crc32c(0, Buffer.from('1234')), Buffer.from('56789'))).toBe(crc32c(0, Buffer.from('123456789')));
  });
});

describe('readWalState', () => {
  let dir: string;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wal-state-'));
  });

  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('when the data directory has several segments, then the newest is read (each begins with the current HardState)', () => {
    const wal = path.join(dir, 'member', 'wal');
    fs.mkdirSync(wal, { recursive: true });
    fs.writeFileSync(
      path.join(wal, '0000000000000000-0000000000000000.wal'),
      new Segment().metadata(MEMBER, CLUSTER).state(2, 1, 10).entries(2, 1, 10).bytes(),
    );
    fs.writeFileSync(
      path.join(wal, '0000000000000001-000000000000000b.wal'),
      new Segment(77).metadata(MEMBER, CLUSTER).state(2, 1, 10).entries(2, 11, 20).state(2, 1, 19).bytes(Buffer.alloc(512)),
    );
    fs.writeFileSync(path.join(wal, 'not-a-segment.tmp'), 'x');
    expect(readWalState(dir)).toMatchObject({
      commit: 19,
      lastIndex: 20,
      segment: path.join(wal, '0000000000000001-000000000000000b.wal'),
    });
  });

  it('when the data directory has no WAL, then it answers undefined', () => {
    expect(readWalState(dir)).toBeUndefined();
    expect(readWalState(path.join(dir, 'missing'))).toBeUndefined();
  });
});
