/**
 * What an etcd backend file holds of the key space, read from its `key` bucket without etcd: the
 * newest revision and the number of live keys. Every entry of that bucket is one revision of one key:
 * its bbolt key is the revision (8 bytes main, `_`, 8 bytes sub, big-endian) and, for a delete, a
 * trailing `t`; its value an mvccpb.KeyValue whose field 1 is the key. A key is live when its newest
 * entry is not a delete. For a file no process writes (a restored snapshot being verified).
 */
import { forEachBboltEntry } from './bbolt';
import { decodeFields } from './data-dir';

/** The key space of a backend file. */
export interface KeySpace {
  /** The newest main revision in the file (0 for an empty key space). */
  revision: number;
  /** Keys whose newest revision is not a delete. */
  keys: number;
}

const REVISION_BYTES = 17;

/** Reads the key space of the backend file `dbFile` (etcd's `member/snap/db`). */
export function readKeySpace(dbFile: string): KeySpace {
  const live = new Map<string, boolean>();
  let revision = 0n;
  const found = forEachBboltEntry(dbFile, 'key', (key, value) => {
    if (key.length < REVISION_BYTES || key[8] !== 0x5f) throw new Error(`${dbFile}: a key-bucket entry that is not a revision`);
    const main = key.readBigUInt64BE(0);
    if (main > revision) revision = main;
    const userKey = decodeFields(value)?.bytes.get(1);
    if (userKey === undefined) throw new Error(`${dbFile}: revision ${main} holds no key`);
    // Entries come in revision order, so the last one seen for a key is its newest.
    live.set(userKey.toString('latin1'), !(key.length > REVISION_BYTES && key[REVISION_BYTES] === 0x74));
  });
  if (!found) throw new Error(`${dbFile} has no key bucket: it is not an etcd backend`);
  let keys = 0;
  for (const alive of live.values()) if (alive) keys++;
  return { revision: Number(revision), keys };
}
