/**
 * What an etcd backend file holds of the key space, read from its `key` bucket without etcd: the
 * newest revision and the number of live keys. Every entry of that bucket is one revision of one key:
 * its bbolt key is the revision (8 bytes main, `_`, 8 bytes sub, big-endian) and, for a delete, a
 * trailing `t`; its value an mvccpb.KeyValue whose field 1 is the key. A key is live when its newest
 * entry is not a delete. For a file no process writes (a restored snapshot being verified).
 *
 * Bounded, for the sidecar's memory limit and its event loop: the file is read asynchronously page
 * by page, and of each value only the key at its start (bbolt.ts `walkBboltBucket`). Entries come in
 * revision order, not by key, so whether a key is live is known only at the end: the keys seen are
 * held in a map. When that map would pass `budgetBytes`, the keys are counted in several passes over
 * the file instead, each holding only the keys whose hash falls in its share.
 */
import { walkBboltBucket, type ValueHead } from './bbolt';
import { decodeFields } from './data-dir';

/** The key space of a backend file. */
export interface KeySpace {
  /** The newest main revision in the file (0 for an empty key space). */
  revision: number;
  /** Keys whose newest revision is not a delete. */
  keys: number;
}

const REVISION_BYTES = 17;
/** What one key held in the map costs beyond its bytes (the map's entry and the string's header), about. */
const ENTRY_OVERHEAD_BYTES = 80;
/** The memory the map of keys may take by default: a tenth of the sidecar's 200 MiB limit. */
export const KEY_SPACE_BUDGET_BYTES = 20 * 1024 * 1024;
/** Enough of a value for the key field's tag and length (a varint of at most 5 bytes for etcd's sizes). */
const KEY_FIELD_HEAD = 6;

/** Reads the key space of the backend file `dbFile` (etcd's `member/snap/db`); see the module comment. */
export async function readKeySpace(dbFile: string, budgetBytes = KEY_SPACE_BUDGET_BYTES): Promise<KeySpace> {
  let revision = 0n;
  const pass = async (onEntry: (userKey: Buffer, deleted: boolean) => void): Promise<void> => {
    const found = await walkBboltBucket(dbFile, 'key', async (key, value) => {
      if (key.length < REVISION_BYTES || key[8] !== 0x5f) throw new Error(`${dbFile}: a key-bucket entry that is not a revision`);
      const main = key.readBigUInt64BE(0);
      if (main > revision) revision = main;
      const userKey = await userKeyOf(value);
      if (userKey === undefined) throw new Error(`${dbFile}: revision ${main} holds no key`);
      onEntry(userKey, key.length > REVISION_BYTES && key[REVISION_BYTES] === 0x74);
    });
    if (!found) throw new Error(`${dbFile} has no key bucket: it is not an etcd backend`);
  };

  // The first pass holds every key, unless they outgrow the budget; it always measures them.
  let live: Map<string, boolean> | undefined = new Map();
  let held = 0;
  await pass((userKey, deleted) => {
    held += userKey.length + ENTRY_OVERHEAD_BYTES;
    if (live === undefined) return;
    // Entries come in revision order, so the last one seen for a key is its newest.
    live.set(userKey.toString('latin1'), !deleted);
    if (held > budgetBytes) live = undefined;
  });
  if (live !== undefined) return { revision: Number(revision), keys: liveIn(live) };

  // `held` counted every revision of every key, at least what the keys take: each share fits.
  const shares = Math.ceil(held / budgetBytes) + 1;
  let keys = 0;
  for (let share = 0; share < shares; share++) {
    const part = new Map<string, boolean>();
    await pass((userKey, deleted) => {
      if (hashOf(userKey) % shares === share) part.set(userKey.toString('latin1'), !deleted);
    });
    keys += liveIn(part);
  }
  return { revision: Number(revision), keys };
}

/** The key (field 1) of an mvccpb.KeyValue, read from the value's start: etcd marshals it first. */
async function userKeyOf(value: ValueHead): Promise<Buffer | undefined> {
  const head = await value.read(KEY_FIELD_HEAD);
  if (head[0] === 0x0a) {
    let length = 0;
    for (let at = 1, shift = 0; at < head.length && shift < 35; at++, shift += 7) {
      length += (head[at] & 0x7f) * 2 ** shift;
      if ((head[at] & 0x80) === 0) {
        const field = await value.read(at + 1 + length);
        return field.length === at + 1 + length ? field.subarray(at + 1) : undefined;
      }
    }
  }
  // Not in that order: the whole value, decoded.
  return decodeFields(await value.read(value.size))?.bytes.get(1);
}

function liveIn(keys: Map<string, boolean>): number {
  let count = 0;
  for (const alive of keys.values()) if (alive) count++;
  return count;
}

/** FNV-1a, 32 bits: spreads keys over the passes. */
function hashOf(bytes: Buffer): number {
  let hash = 0x811c9dc5;
  for (const b of bytes) hash = Math.imul(hash ^ b, 0x01000193) >>> 0;
  return hash;
}
