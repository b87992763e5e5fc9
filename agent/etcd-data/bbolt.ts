/**
 * Reads one value out of a bbolt file (etcd's backend, `member/snap/db`) without bbolt, or walks the
 * keys of a bucket: enough of its on-disk format to go from the newest valid meta page through the
 * root bucket to a top-level bucket. Read-only, page by page (the file may be gigabytes), for a file no process is
 * writing (prepare runs before etcd starts). Invariant: anything that does not look like the format
 * (bad magic, checksum, page type, an offset outside the file) is an error, never a guess.
 *
 * The format (go.etcd.io/bbolt, file format version 2), all integers little-endian:
 * - a page is `pageSize` bytes (× 1 + `overflow`): header {id u64, flags u16, count u16, overflow u32},
 *   then `count` elements; flags 0x01 branch, 0x02 leaf, 0x04 meta;
 * - pages 0 and 1 are meta pages: {magic u32 = 0xED0CDAED, version u32 = 2, pageSize u32, flags u32,
 *   root bucket {root pgid u64, sequence u64}, freelist u64, pgid u64, txid u64, checksum u64}, the
 *   checksum being FNV-1a 64 of the 56 bytes before it; the valid one with the higher txid is current;
 * - a branch element is {pos u32, ksize u32, pgid u64}, a leaf element {flags u32, pos u32, ksize u32,
 *   vsize u32}, `pos` counted from the element itself; keys are sorted bytewise; a leaf element with
 *   flag 0x01 is a bucket, whose value is {root pgid u64, sequence u64}, followed by the bucket's own
 *   page inline when root is 0.
 */
import * as fs from 'node:fs';
import { promises as fsp } from 'node:fs';

const MAGIC = 0xed0cdaed;
const FORMAT_VERSION = 2;
const PAGE_HEADER = 16;
const ELEMENT = 16;
const BRANCH = 0x01;
const LEAF = 0x02;
const META = 0x04;
const BUCKET_LEAF = 0x01;
/** Deeper than any real tree: a loop in the page links is an error, not a hang. */
const MAX_DEPTH = 64;

/** A page's bytes (header included) and where it came from, for error messages. */
interface Page {
  bytes: Buffer;
  where: string;
}

/**
 * The value of `key` in the top-level bucket `bucket` of the bbolt file `file`; undefined when the
 * bucket or the key is absent. Throws when the file is not a bbolt file it can read.
 */
export function readBboltValue(file: string, bucket: string, key: string): Buffer | undefined {
  return inBucket(file, bucket, (reader, root) => reader.lookup(root, Buffer.from(key), false));
}

/** A value met by `walkBboltBucket`: its size, and a read of its first bytes. */
export interface ValueHead {
  size: number;
  /** The first `n` bytes of the value (all of it when shorter). */
  read(n: number): Promise<Buffer>;
}

/**
 * Visits every key of the top-level bucket `bucket` of `file` in key order (bucket entries inside it
 * are skipped) with a reader of its value; false when the bucket is absent. The pages are read
 * asynchronously one at a time, and of a value stored on overflow pages only what the visitor asks
 * for: a walk over gigabytes neither blocks the event loop nor reads values it does not need.
 * Throws as `readBboltValue` does.
 */
export async function walkBboltBucket(
  file: string,
  bucket: string,
  visit: (key: Buffer, value: ValueHead) => void | Promise<void>,
): Promise<boolean> {
  const start = inBucket(file, bucket, (reader, root) => ({ root, pageSize: reader.pageBytes }));
  if (start === undefined) return false;
  const handle = await fsp.open(file, 'r');
  try {
    const size = (await handle.stat()).size;
    const read = async (offset: number, length: number): Promise<Buffer> => {
      const buffer = Buffer.allocUnsafe(length);
      const { bytesRead } = await handle.read(buffer, 0, length, offset);
      if (bytesRead !== length) throw new Error(`${file}: short read at ${offset} (${bytesRead} of ${length} bytes)`);
      return buffer;
    };
    const load = async (id: bigint): Promise<LazyPage> => {
      const offset = Number(id) * start.pageSize;
      if (id < 2n || offset + PAGE_HEADER > size) throw new Error(`${file}: page ${id} is outside the file`);
      const head = await read(offset, Math.min(start.pageSize, size - offset));
      const length = (head.readUInt32LE(12) + 1) * start.pageSize;
      if (offset + length > size) throw new Error(`${file}: page ${id} (${length / start.pageSize} pages) runs past the end`);
      return new LazyPage(head, length, `page ${id}`, file, (at, n) => read(offset + at, n));
    };
    const walk = async (page: LazyPage, depth: number): Promise<void> => {
      if (depth > MAX_DEPTH) throw new Error(`${file}: the tree is deeper than ${MAX_DEPTH} pages`);
      const flags = page.head.readUInt16LE(8);
      const count = page.head.readUInt16LE(10);
      if ((flags & (BRANCH | LEAF)) === 0) throw new Error(`${file}: ${page.where} is neither a branch nor a leaf page (flags ${flags})`);
      for (let i = 0; i < count; i++) {
        const at = PAGE_HEADER + i * ELEMENT;
        const element = await page.range(at, ELEMENT);
        if ((flags & BRANCH) !== 0) {
          await walk(await load(element.readBigUInt64LE(8)), depth + 1);
          continue;
        }
        if ((element.readUInt32LE(0) & BUCKET_LEAF) !== 0) continue;
        const keyAt = at + element.readUInt32LE(4);
        const keySize = element.readUInt32LE(8);
        const valueSize = element.readUInt32LE(12);
        const key = await page.range(keyAt, keySize);
        if (keyAt + keySize + valueSize > page.length) throw new Error(`${file}: an element of ${page.where} points outside it`);
        await visit(key, { size: valueSize, read: (n) => page.range(keyAt + keySize, Math.min(n, valueSize)) });
      }
    };
    const { root } = start;
    await walk(
      root.inline === undefined
        ? await load(root.root)
        : new LazyPage(root.inline.bytes, root.inline.bytes.length, root.inline.where, file),
      0,
    );
    return true;
  } finally {
    await handle.close();
  }
}

/** A page of which the first bytes are read (all of an inline one); the rest is read only where asked. */
class LazyPage {
  constructor(
    readonly head: Buffer,
    readonly length: number,
    readonly where: string,
    private readonly file: string,
    private readonly readAt?: (at: number, n: number) => Promise<Buffer>,
  ) {}

  /** `n` bytes at `at` of the page. */
  async range(at: number, n: number): Promise<Buffer> {
    if (at + n <= this.head.length) return this.head.subarray(at, at + n);
    if (at + n > this.length || this.readAt === undefined) throw new Error(`${this.file}: an element of ${this.where} points outside it`);
    return this.readAt(at, n);
  }
}

/** `fn` on the top-level bucket `bucket` of `file`; undefined when the bucket is absent. */
function inBucket<T>(file: string, bucket: string, fn: (reader: PageReader, root: BucketRoot) => T): T | undefined {
  const fd = fs.openSync(file, 'r');
  try {
    const reader = new PageReader(fd, fs.fstatSync(fd).size, file);
    const root = reader.rootBucket();
    const bucketValue = reader.lookup({ root, inline: undefined }, Buffer.from(bucket), true);
    return bucketValue === undefined ? undefined : fn(reader, reader.bucketAt(bucketValue));
  } finally {
    fs.closeSync(fd);
  }
}

/** Where a bucket's tree starts: a page id, or (for a small bucket) its page inline. */
interface BucketRoot {
  root: bigint;
  inline: Page | undefined;
}

class PageReader {
  private pageSize = 0;

  /** The file's page size, known once `rootBucket` has read it. */
  get pageBytes(): number {
    return this.pageSize;
  }

  constructor(
    private readonly fd: number,
    private readonly size: number,
    private readonly file: string,
  ) {}

  /** The root bucket of the current meta page; sets the page size. */
  rootBucket(): bigint {
    const first = this.read(0, Math.min(this.size, 4096));
    const candidates: Array<{ txid: bigint; root: bigint }> = [];
    const firstMeta = parseMeta(first);
    // bbolt writes both meta pages at creation; page 0 gives the page size, page 1 sits one page later.
    const pageSize = firstMeta?.pageSize ?? 4096;
    if (firstMeta !== undefined) candidates.push(firstMeta);
    if (this.size >= 2 * pageSize) {
      const second = parseMeta(this.read(pageSize, Math.min(pageSize, 4096)));
      if (second !== undefined && second.pageSize === pageSize) candidates.push(second);
    }
    if (candidates.length === 0) throw new Error(`${this.file} is not a bbolt file (no valid meta page)`);
    this.pageSize = pageSize;
    return candidates.sort((a, b) => (a.txid > b.txid ? -1 : 1))[0].root;
  }

  /** The bucket header `value` (a bucket's leaf value) as a root to search from. */
  bucketAt(value: Buffer): BucketRoot {
    if (value.length < 16) throw new Error(`${this.file}: a bucket value of ${value.length} bytes`);
    const root = value.readBigUInt64LE(0);
    if (root !== 0n) return { root, inline: undefined };
    return { root, inline: { bytes: value.subarray(16), where: 'an inline bucket' } };
  }

  /** The value of `key` under `from`, when it is (`wantBucket`) or is not a bucket; undefined when absent. */
  lookup(from: BucketRoot, key: Buffer, wantBucket: boolean): Buffer | undefined {
    let page = from.inline ?? this.page(from.root);
    for (let depth = 0; depth < MAX_DEPTH; depth++) {
      const flags = page.bytes.readUInt16LE(8);
      const count = page.bytes.readUInt16LE(10);
      if ((flags & BRANCH) !== 0) {
        if (count === 0) return undefined;
        // The last element whose key is at most `key` (the first one when all are greater).
        let chosen = 0;
        for (let i = 0; i < count; i++) {
          if (Buffer.compare(this.elementKey(page, i, false), key) <= 0) chosen = i;
          else break;
        }
        page = this.page(this.element(page, chosen).readBigUInt64LE(8));
        continue;
      }
      if ((flags & LEAF) === 0) throw new Error(`${this.file}: ${page.where} is neither a branch nor a leaf page (flags ${flags})`);
      for (let i = 0; i < count; i++) {
        if (!this.elementKey(page, i, true).equals(key)) continue;
        const element = this.element(page, i);
        const isBucket = (element.readUInt32LE(0) & BUCKET_LEAF) !== 0;
        return isBucket === wantBucket ? this.elementValue(page, i) : undefined;
      }
      return undefined;
    }
    throw new Error(`${this.file}: the tree is deeper than ${MAX_DEPTH} pages`);
  }

  private page(id: bigint): Page {
    const offset = Number(id) * this.pageSize;
    if (id < 2n || offset + PAGE_HEADER > this.size) throw new Error(`${this.file}: page ${id} is outside the file`);
    const header = this.read(offset, PAGE_HEADER);
    const overflow = header.readUInt32LE(12);
    const length = (overflow + 1) * this.pageSize;
    if (offset + length > this.size) throw new Error(`${this.file}: page ${id} (${overflow + 1} pages) runs past the end`);
    return { bytes: this.read(offset, length), where: `page ${id}` };
  }

  private element(page: Page, i: number): Buffer {
    const at = PAGE_HEADER + i * ELEMENT;
    if (at + ELEMENT > page.bytes.length) throw new Error(`${this.file}: element ${i} of ${page.where} is outside it`);
    return page.bytes.subarray(at, at + ELEMENT);
  }

  private elementKey(page: Page, i: number, leaf: boolean): Buffer {
    const element = this.element(page, i);
    const at = PAGE_HEADER + i * ELEMENT + element.readUInt32LE(leaf ? 4 : 0);
    const size = element.readUInt32LE(leaf ? 8 : 4);
    return this.slice(page, at, size);
  }

  private elementValue(page: Page, i: number): Buffer {
    const element = this.element(page, i);
    const at = PAGE_HEADER + i * ELEMENT + element.readUInt32LE(4) + element.readUInt32LE(8);
    return this.slice(page, at, element.readUInt32LE(12));
  }

  private slice(page: Page, at: number, size: number): Buffer {
    if (at + size > page.bytes.length) throw new Error(`${this.file}: an element of ${page.where} points outside it`);
    return page.bytes.subarray(at, at + size);
  }

  private read(offset: number, length: number): Buffer {
    const buffer = Buffer.alloc(length);
    const got = fs.readSync(this.fd, buffer, 0, length, offset);
    if (got !== length) throw new Error(`${this.file}: short read at ${offset} (${got} of ${length} bytes)`);
    return buffer;
  }
}

/** A meta page's page size, root bucket and txid, or undefined when it is not a valid meta page. */
function parseMeta(page: Buffer): { pageSize: number; root: bigint; txid: bigint } | undefined {
  if (page.length < PAGE_HEADER + 64 || (page.readUInt16LE(8) & META) === 0) return undefined;
  const meta = page.subarray(PAGE_HEADER, PAGE_HEADER + 64);
  if (meta.readUInt32LE(0) !== MAGIC || meta.readUInt32LE(4) !== FORMAT_VERSION) return undefined;
  if (fnv1a64(meta.subarray(0, 56)) !== meta.readBigUInt64LE(56)) return undefined;
  const pageSize = meta.readUInt32LE(8);
  if (pageSize < 1024 || pageSize > 1 << 20) return undefined;
  return { pageSize, root: meta.readBigUInt64LE(16), txid: meta.readBigUInt64LE(48) };
}

/** FNV-1a, 64 bits (Go's hash/fnv New64a), as bbolt checksums its meta pages. */
function fnv1a64(bytes: Buffer): bigint {
  let hash = 0xcbf29ce484222325n;
  for (const b of bytes) {
    hash ^= BigInt(b);
    hash = (hash * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return hash;
}
