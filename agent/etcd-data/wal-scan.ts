/**
 * Whether a data directory's write-ahead log still holds, after its last snapshot, entries that
 * etcd 3.5 and older wrote as bare v2 requests (`etcdserverpb.Request`: every 3.5 member's publish
 * of its name and client URLs, and 3.5's cluster version updates). etcd replays the entries after
 * its last snapshot at every start; 3.6 still reads v2 requests, 3.7 does not and panics ("unmarshal
 * should never fail", exit 2). They are gone only once the member has taken a
 * snapshot after the last 3.5 member stopped: after `--snapshot-count` entries (10,000 by default),
 * which a quiet cluster may not reach for a long time.
 *
 * Read only, segment by segment, in a window of the file (segments are 64 MB, mostly zeroes at the
 * end). A torn or zeroed tail ends a segment's scan, as it ends etcd's own read.
 *
 * Frames: an 8-byte little-endian length (the top byte flags padding to 8 bytes), then a
 * walpb.Record{Type = 1, Crc = 2, Data = 3}; type 2 is a raftpb.Entry{Type = 1, Term = 2, Index = 3,
 * Data = 4}, type 5 a walpb.Snapshot{Index = 1, Term = 2}. A v2 request begins with its ID (field 1)
 * and its method (field 2, e.g. `PUT`); an InternalRaftRequest's field 2 is a message instead.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { decodeFields } from './data-dir';

const ENTRY_RECORD = 2n;
const SNAPSHOT_RECORD = 5n;
const NORMAL_ENTRY = 0n;
/** Larger frames are not etcd's (its records are at most a request, 1.5 MiB by default, plus a little). */
const MAX_RECORD_BYTES = 64 << 20;
const WINDOW_BYTES = 1 << 20;
/** The methods of etcd's v2 requests. */
const V2_METHOD = /^(GET|PUT|POST|DELETE|QGET|SYNC|HEAD)$/;

/** What the scan found: the last snapshot's index and the v2 requests after it. */
export interface WalTail {
  snapshotIndex: bigint;
  /** How many entries after the last snapshot are v2 requests (0: etcd 3.7 can replay the log). */
  v2Entries: number;
}

/** Scans `dataDir`'s write-ahead log; undefined when it has none. Throws on I/O errors. */
export function scanWal(dataDir: string): WalTail | undefined {
  const walDir = path.join(dataDir, 'member', 'wal');
  let files: string[];
  try {
    files = fs
      .readdirSync(walDir)
      .filter((f) => f.endsWith('.wal'))
      .sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  if (files.length === 0) return undefined;
  let snapshotIndex = 0n;
  // Indexes of v2 entries; a later entry of the same index (a new leader's) replaces an earlier one.
  const v2 = new Set<bigint>();
  for (const file of files) {
    for (const record of records(path.join(walDir, file))) {
      if (record.type === SNAPSHOT_RECORD) {
        const index = record.data === undefined ? undefined : decodeFields(record.data)?.varints.get(1);
        if (index !== undefined && index > snapshotIndex) snapshotIndex = index;
      } else if (record.type === ENTRY_RECORD && record.data !== undefined) {
        const entry = decodeFields(record.data);
        const index = entry?.varints.get(3);
        if (entry === undefined || index === undefined) continue;
        const data = entry.bytes.get(4);
        const isV2 = (entry.varints.get(1) ?? NORMAL_ENTRY) === NORMAL_ENTRY && data !== undefined && isV2Request(data);
        if (isV2) v2.add(index);
        else v2.delete(index);
      }
    }
  }
  return { snapshotIndex, v2Entries: [...v2].filter((index) => index > snapshotIndex).length };
}

/** Whether an entry's data is a bare v2 request (its field 2 a method name), not an InternalRaftRequest. */
export function isV2Request(data: Buffer): boolean {
  const method = decodeFields(data)?.bytes.get(2);
  return method !== undefined && method.length <= 8 && V2_METHOD.test(method.toString('latin1'));
}

/** The records of one segment, in order, up to its end or the first frame that is not a record. */
function* records(file: string): Generator<{ type: bigint; data?: Buffer }> {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const window = { start: 0, bytes: Buffer.alloc(0) };
    const read = (offset: number, length: number): Buffer => {
      if (offset < window.start || offset + length > window.start + window.bytes.length) {
        const bytes = Buffer.allocUnsafe(Math.min(Math.max(length, WINDOW_BYTES), size - offset));
        const got = fs.readSync(fd, bytes, 0, bytes.length, offset);
        if (got < length) throw new Error(`${file}: short read at ${offset} (${got} of ${length} bytes)`);
        Object.assign(window, { start: offset, bytes: bytes.subarray(0, got) });
      }
      return window.bytes.subarray(offset - window.start, offset - window.start + length);
    };
    for (let offset = 0; offset + 8 <= size;) {
      const lenField = read(offset, 8).readBigUInt64LE(0);
      const length = Number(lenField & 0xffffffffffffffn);
      const pad = lenField >> 63n === 1n ? Number((lenField >> 56n) & 0x7n) : 0;
      if (length === 0 || length > MAX_RECORD_BYTES || offset + 8 + length > size) return;
      const fields = decodeFields(read(offset + 8, length));
      const type = fields?.varints.get(1);
      if (fields === undefined || type === undefined) return;
      // A copy: the window moves on, and a caller may keep the data.
      const data = fields.bytes.get(3);
      yield { type, ...(data === undefined ? {} : { data: Buffer.from(data) }) };
      offset += 8 + length + pad;
    }
  } finally {
    fs.closeSync(fd);
  }
}
