/**
 * What an etcd data directory holds, read from etcd's own files, and the two
 * changes `prepare` may make to it. Invariant: nothing here deletes data — a
 * directory that must not be used is renamed aside, with the time in its name.
 *
 * Which member a data directory holds is read from its write-ahead log: every
 * WAL file begins with a CRC record and a metadata record whose data is
 * etcdserverpb.Metadata{NodeID = 1, ClusterID = 2}, written when the member
 * first started and again at the head of each new 64 MB segment (etcd
 * server/wal/wal.go Create and cut). That is etcd's own record of the member id
 * and cluster id, so no side file can disagree with it (etcdutl, which could
 * print it, is not part of etcd 3.4). The lowest-numbered segment present is
 * read, never a fixed name: etcd purges old segments once a snapshot is past
 * them, and 3.6 snapshots ten times as often as 3.4 and 3.5
 * (etcd-data-dir-facts.test.ts purges the first segment on every version).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { readBboltValue } from './bbolt';

/** What a data directory holds. */
export type DataDirState =
  /** Missing, or empty: etcd would start a fresh member here. */
  | { kind: 'empty' }
  /** A WAL of member `memberId` of cluster `clusterId` (lowercase hex, as etcdctl prints ids). */
  | { kind: 'member'; memberId: string; clusterId: string }
  /** Files etcd would misread (e.g. a snapshot database without a WAL): unusable as it is. */
  | { kind: 'unusable'; reason: string };

/**
 * The bootstrap marker prepare writes inside the data directory before etcd first starts `new`:
 * inside, so a lost or wiped directory loses it too and can never pass for "decided, never started".
 * etcd only warns about a file it does not know there.
 */
export const BOOTSTRAP_MARKER = 'etcd-lifecycle-agent-bootstrap.json';

/** The versions a data directory records (`3.6.0` …); absent when it does not record one. */
export interface DataVersions {
  storage?: string;
  cluster?: string;
}

/**
 * The versions etcd recorded in the data directory's backend (`member/snap/db`, bbolt): the storage
 * version (3.6 and later, `meta/storageVersion`) and the cluster version (3.4 and later,
 * `cluster/clusterVersion`), e.g. `3.7.0`; either absent when not recorded, both when there is no
 * backend yet. Throws when the backend cannot be read.
 */
export function readDataVersions(dataDir: string): DataVersions {
  const db = path.join(dataDir, 'member', 'snap', 'db');
  if (!fs.existsSync(db)) return {};
  const text = (bucket: string, key: string): string | undefined => readBboltValue(db, bucket, key)?.toString('utf8');
  const storage = text('meta', 'storageVersion');
  const cluster = text('cluster', 'clusterVersion');
  return { ...(storage === undefined ? {} : { storage }), ...(cluster === undefined ? {} : { cluster }) };
}

/** walpb.Record types (etcd server/wal/wal.go). */
const METADATA_RECORD = 1;
/** A record larger than this is not a WAL's first metadata record: the file is not a WAL. */
const MAX_FIRST_RECORD_BYTES = 1 << 20;
/** All readWalMetadata may look at (its first 4 frames): a segment is 64 MB, mostly not needed here. */
const WAL_HEAD_BYTES = 4 * (8 + MAX_FIRST_RECORD_BYTES + 8);
/**
 * What is read first: etcd's first frames (the CRC, then the metadata with the two ids) take well under
 * a kilobyte. Only when they do not fit is the whole head read: the sidecar's rejoin watch reads the
 * data directory every 2 s, and reading 4 MB each time would cost it far more CPU than the 64 KiB.
 */
const WAL_FIRST_BYTES = 64 * 1024;

/** Reads what `dataDir` holds; throws only on I/O errors other than "missing". */
export function readDataDir(dataDir: string): DataDirState {
  const entries = listDir(dataDir)?.filter((f) => f !== BOOTSTRAP_MARKER);
  if (entries === undefined || entries.length === 0) return { kind: 'empty' };
  const walDir = path.join(dataDir, 'member', 'wal');
  // `%016x-%016x.wal`: the name order is the segment order (`.tmp` files are preallocated, not segments).
  const wals = (listDir(walDir) ?? []).filter((f) => f.endsWith('.wal')).sort();
  if (wals.length === 0) {
    return { kind: 'unusable', reason: `it holds ${entries.join(', ')} but no write-ahead log (member/wal/*.wal)` };
  }
  const first = path.join(walDir, wals[0]);
  // Frames cut off by the shorter read answer undefined, never other ids: then the whole head decides.
  const meta = readWalMetadata(readHead(first, WAL_FIRST_BYTES)) ?? readWalMetadata(readHead(first, WAL_HEAD_BYTES));
  if (meta === undefined) return { kind: 'unusable', reason: `${first} does not begin with etcd's WAL metadata` };
  return { kind: 'member', ...meta };
}

/**
 * The member and cluster ids in the metadata record at the head of a WAL file's bytes, or undefined
 * when the bytes are not a WAL. Frames are an 8-byte little-endian length (the top byte flags
 * padding to 8 bytes) followed by a walpb.Record{Type = 1, Crc = 2, Data = 3}.
 */
export function readWalMetadata(bytes: Buffer): { memberId: string; clusterId: string } | undefined {
  let offset = 0;
  for (let record = 0; record < 4 && offset + 8 <= bytes.length; record++) {
    const lenField = bytes.readBigUInt64LE(offset);
    const size = Number(lenField & 0xffffffffffffffn);
    const pad = lenField >> 63n === 1n ? Number((lenField >> 56n) & 0x7n) : 0;
    offset += 8;
    if (size === 0 || size > MAX_FIRST_RECORD_BYTES || offset + size > bytes.length) return undefined;
    const fields = decodeFields(bytes.subarray(offset, offset + size));
    offset += size + pad;
    if (fields === undefined) return undefined;
    if (fields.varints.get(1) !== BigInt(METADATA_RECORD)) continue;
    const data = fields.bytes.get(3);
    const meta = data === undefined ? undefined : decodeFields(data);
    const node = meta?.varints.get(1);
    const cluster = meta?.varints.get(2);
    if (node === undefined || cluster === undefined || node === 0n) return undefined;
    return { memberId: node.toString(16), clusterId: cluster.toString(16) };
  }
  return undefined;
}

/** The varint and length-delimited fields of one protobuf message (the only wire types a WAL head uses). */
export function decodeFields(buf: Buffer): { varints: Map<number, bigint>; bytes: Map<number, Buffer> } | undefined {
  const varints = new Map<number, bigint>();
  const bytes = new Map<number, Buffer>();
  let at = 0;
  const varint = (): bigint | undefined => {
    let value = 0n;
    for (let shift = 0n; at < buf.length && shift < 70n; shift += 7n) {
      const b = buf[at++];
      value |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return value;
    }
    return undefined;
  };
  while (at < buf.length) {
    const key = varint();
    if (key === undefined) return undefined;
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (field === 0) return undefined;
    if (wire === 0) {
      const v = varint();
      if (v === undefined) return undefined;
      varints.set(field, v);
    } else if (wire === 2) {
      const len = varint();
      if (len === undefined || at + Number(len) > buf.length) return undefined;
      bytes.set(field, buf.subarray(at, at + Number(len)));
      at += Number(len);
    } else {
      return undefined;
    }
  }
  return { varints, bytes };
}

/**
 * Renames `dataDir` to `<dataDir>.removed-<UTC time>` (a sibling, so the same volume: a rename, never
 * a copy) and answers the new path. A second move in the same second gets a numbered suffix.
 */
export function moveAside(dataDir: string, now = new Date()): string {
  const target = asideTarget(dataDir, now);
  fs.renameSync(dataDir, target);
  fsyncDir(path.dirname(dataDir));
  return target;
}

/** The first free `<dataDir>.removed-<UTC time>[-n]` sibling: where moveAside (or etcd's start script) puts it. */
export function asideTarget(dataDir: string, now = new Date()): string {
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  for (let n = 0; ; n++) {
    const target = `${dataDir}.removed-${stamp}${n === 0 ? '' : `-${n}`}`;
    if (!fs.existsSync(target)) return target;
  }
}

/** Writes `content` to `file` so a reader sees the old file or the whole new one, never half (write, fsync, rename). */
export function writeFileAtomic(file: string, content: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = fs.openSync(tmp, 'w', 0o644);
  try {
    fs.writeSync(fd, content);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
  fsyncDir(path.dirname(file));
}

/** The first `length` bytes of `file` (fewer when it is shorter). */
function readHead(file: string, length: number): Buffer {
  const fd = fs.openSync(file, 'r');
  try {
    // Unzeroed: only the bytes read are returned.
    const bytes = Buffer.allocUnsafe(Math.min(length, fs.fstatSync(fd).size));
    const got = fs.readSync(fd, bytes, 0, bytes.length, 0);
    return bytes.subarray(0, got);
  } finally {
    fs.closeSync(fd);
  }
}

function fsyncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, 'r');
    fs.fsyncSync(fd);
  } catch {
    // Not every file system lets a directory be fsynced; the rename is still atomic.
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

function listDir(dir: string): string[] | undefined {
  try {
    return fs.readdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
