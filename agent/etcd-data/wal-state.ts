/**
 * How far a stopped member's raft log reached, read from its write-ahead log alone: the last
 * HardState (term, vote, commit) and the last entry's index and term. This is what a recovery
 * keeps: `--force-new-cluster` discards every entry above the HardState's commit (etcd
 * server/etcdserver/raft.go restartAsStandaloneNode), so the commit index read here is exactly
 * what a recovery from this member would keep.
 *
 * Cheap and right: only the newest segment is read. etcd writes the current HardState at the head
 * of every new segment (wal.go cut: crc, metadata, state), so the newest segment always holds the
 * latest one. Records are checked against etcd's rolling CRC-32C, so a torn tail (a write cut by a
 * crash, or the segment's zero-filled preallocation) ends the read instead of being misread.
 * `etcdutl` could print the same, but it is not in etcd 3.4 and not in the agent's image.
 *
 * Invariant: read only; a file that is not a WAL answers undefined, never a guess.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { decodeFields, readWalMetadata } from './data-dir';

/** walpb.Record types (etcd server/storage/wal/wal.go). */
const RECORD = { metadata: 1, entry: 2, state: 3, crc: 4, snapshot: 5 } as const;

/** What the newest WAL segment says about a member's log. */
export interface WalState {
  memberId: string;
  clusterId: string;
  /** The last HardState persisted: the member's term, its vote, and the highest index it knew committed. */
  term: number;
  vote: string;
  commit: number;
  /** The last entry written to the log (committed or not), or the last snapshot's when no entry followed it. */
  lastIndex: number;
  lastTerm: number;
  /** The segment read, and how many records of it were valid. */
  segment: string;
  records: number;
}

/** Reads the WAL of `dataDir`; undefined when it has none, or its newest segment is not a WAL. */
export function readWalState(dataDir: string): WalState | undefined {
  const walDir = path.join(dataDir, 'member', 'wal');
  let names: string[];
  try {
    names = fs
      .readdirSync(walDir)
      .filter((f) => /^[0-9a-f]{16}-[0-9a-f]{16}\.wal$/.test(f))
      .sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  if (names.length === 0) return undefined;
  const segment = path.join(walDir, names[names.length - 1]);
  const state = walStateOf(fs.readFileSync(segment));
  return state === undefined ? undefined : { ...state, segment };
}

/** The state in one segment's bytes (see readWalState); undefined when they do not begin as a WAL. */
export function walStateOf(bytes: Buffer): Omit<WalState, 'segment'> | undefined {
  const meta = readWalMetadata(bytes);
  if (meta === undefined) return undefined;
  let digest: number | undefined;
  let term = 0;
  let vote = '0';
  let commit = 0;
  let lastIndex = 0;
  let lastTerm = 0;
  let records = 0;
  let seenState = false;
  let offset = 0;
  while (offset + 8 <= bytes.length) {
    const lenField = bytes.readBigUInt64LE(offset);
    const size = Number(lenField & 0xffffffffffffffn);
    const pad = lenField >> 63n === 1n ? Number((lenField >> 56n) & 0x7n) : 0;
    if (size === 0 || offset + 8 + size > bytes.length) break;
    const record = decodeFields(bytes.subarray(offset + 8, offset + 8 + size));
    if (record === undefined) break;
    const type = Number(record.varints.get(1) ?? 0n);
    const crc = Number(record.varints.get(2) ?? 0n);
    const data = record.bytes.get(3) ?? Buffer.alloc(0);
    if (type === RECORD.crc) {
      // The previous segment's rolling CRC: the digest of this one continues from it.
      digest = crc;
    } else {
      const sum = crc32c(digest ?? 0, data);
      if (sum !== crc) break;
      digest = sum;
      if (type === RECORD.state) {
        const hs = decodeFields(data);
        if (hs === undefined) break;
        term = Number(hs.varints.get(1) ?? 0n);
        vote = (hs.varints.get(2) ?? 0n).toString(16);
        commit = Number(hs.varints.get(3) ?? 0n);
        seenState = true;
      } else if (type === RECORD.entry) {
        const entry = decodeFields(data);
        if (entry === undefined) break;
        lastTerm = Number(entry.varints.get(2) ?? 0n);
        lastIndex = Number(entry.varints.get(3) ?? 0n);
      } else if (type === RECORD.snapshot) {
        const snap = decodeFields(data);
        if (snap === undefined) break;
        const index = Number(snap.varints.get(1) ?? 0n);
        if (index >= lastIndex) {
          lastIndex = index;
          lastTerm = Number(snap.varints.get(2) ?? 0n);
        }
      }
    }
    records++;
    offset += 8 + size + pad;
  }
  if (!seenState && lastIndex === 0) return { ...meta, term: 0, vote: '0', commit: 0, lastIndex: 0, lastTerm: 0, records };
  return { ...meta, term, vote, commit, lastIndex, lastTerm, records };
}

/** CRC-32C (Castagnoli), continuing from `crc` as Go's crc32.Update does. */
export function crc32c(crc: number, data: Uint8Array): number {
  let c = ~crc >>> 0;
  for (const b of data) c = TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

const TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();
