/**
 * The backup stores against the real things: S3Store against versitygw, a real S3 server
 * (test/helpers/s3-server.ts), and DirStore against a temporary directory, through one contract
 * (a table over both stores): a streamed upload reads back byte for byte and never runs more than
 * two parts ahead of what the store has acknowledged (so its memory stays flat; backup-memory.test.ts
 * measures the agent's own), an aborted upload leaves nothing, a killed run's unfinished upload is
 * what abortUnfinished removes, and listing and removal cover more objects than one S3 page or batch. Then S3's own failures, each
 * as the StoreError an operator acts on: bad credentials, a missing bucket, the server down and back,
 * a stalled store. Nothing here depends on etcd, so the file runs on the first etcd version only.
 */
import { HeadObjectCommand, ListMultipartUploadsCommand, ListPartsCommand } from '@aws-sdk/client-s3';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { DirStore } from '../../agent/backup/dir-store';
import { parseLocation, type S3Location } from '../../agent/backup/location';
import { S3Store } from '../../agent/backup/s3-store';
import { StoreError, type BackupStore, type StoreFailure } from '../../agent/backup/store';
import { ROOT } from '../helpers/built-agent';
import { eventually, patience } from '../helpers/eventually';
import { startS3Server, type S3Server } from '../helpers/s3-server';

const MiB = 1024 * 1024;
/** The S3 store's part size: at most two of them are in its memory. */
const PART_SIZE = 8 * MiB;

/** A stream of `total` random bytes in 1 MiB chunks, the sha256 of what it yielded, and `onChunk` told the count so far. */
function randomStream(total: number, onChunk: (yielded: number) => void = () => undefined): { body: Readable; sha256: () => string } {
  const hash = createHash('sha256');
  let yielded = 0;
  const body = Readable.from(
    (function* chunks(): Generator<Buffer> {
      while (yielded < total) {
        const chunk = randomBytes(Math.min(MiB, total - yielded));
        hash.update(chunk);
        yielded += chunk.length;
        onChunk(yielded);
        yield chunk;
      }
    })(),
    { objectMode: false },
  );
  return { body, sha256: () => hash.digest('hex') };
}

async function sha256Of(stream: Readable): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of stream) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { sha256: hash.digest('hex'), bytes };
}

/** The StoreError `call` rejects with (failing the test when it resolves or throws anything else). */
async function storeError(call: Promise<unknown>): Promise<StoreError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof StoreError))
    throw new Error(`expected a StoreError, got ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`);
  return err;
}

/** The SDK's default chain reads the environment: the S3 stores of this file get `env`'s credentials. */
function useCredentials(env: Record<string, string | undefined>): () => void {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  const set = (values: Record<string, string | undefined>): void => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  set(env);
  return () => set(saved);
}

/**
 * Starts a child node that uploads `key` from an endless stream through the built store (dist/, the
 * code the agent runs), and SIGKILLs it once `started()` says its upload has begun: a killed run.
 */
async function killedRun(location: string, key: string, env: Record<string, string>, started: () => Promise<boolean>): Promise<void> {
  const script = `
    const { openStore, parseLocation } = require(${JSON.stringify(path.join(ROOT, 'dist/agent/backup/location.js'))});
    const { Readable } = require('node:stream');
    const chunk = Buffer.alloc(1024 * 1024, 7);
    openStore(parseLocation(process.argv[1]))
      .then((store) => store.upload(process.argv[2], Readable.from((function* () { for (;;) yield chunk; })())))
      .then(() => { console.error('the endless upload ended'); process.exit(3); }, (err) => { console.error(err.message); process.exit(2); });`;
  const child = spawn(process.execPath, ['-e', script, location, key], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const exited = new Promise<string>((resolve) => child.once('exit', (code, signal) => resolve(`${code ?? signal}`)));
  let exit: string | undefined;
  void exited.then((how) => (exit = how));
  try {
    await eventually(
      async () => {
        if (exit !== undefined) throw new Error(`the uploading child ended (${exit}) before its upload began: ${stderr}`);
        return started();
      },
      { within: 30_000 },
    );
  } finally {
    child.kill('SIGKILL');
    await exited;
  }
}

/** One store under test and what the test sees of it from outside. */
interface Subject {
  open(): BackupStore;
  /** The store's location URL, for a child process. */
  location: string;
  /** Keys (relative to the store's prefix) of the uploads begun and neither finished nor aborted. */
  unfinished(): Promise<string[]>;
  /** True once an upload of `key` has begun and written something. */
  uploading(key: string): Promise<boolean>;
  /** The bytes of the upload of `key` under way that the store holds (its acknowledged parts, its file so far). */
  acknowledged(key: string): Promise<number>;
  /** How many parts the object `key` was uploaded in (S3's multipart ETag), when the store has parts. */
  partsOf?(key: string): Promise<number>;
}

let server: S3Server;
let dirRoot: string;
let restoreCredentials: () => void;
const opened: BackupStore[] = [];

beforeAll(async () => {
  server = await startS3Server();
  restoreCredentials = useCredentials(server.env);
  dirRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'dir-store-'));
}, patience(120_000));

afterAll(async () => {
  for (const store of opened.splice(0)) store.close();
  restoreCredentials?.();
  await server?.close();
  if (dirRoot !== undefined) fs.rmSync(dirRoot, { recursive: true, force: true });
});

function track<T extends BackupStore>(store: T): T {
  opened.push(store);
  return store;
}

function s3Subject(): Subject {
  const location = parseLocation(server.location) as S3Location;
  const admin = server.client();
  const uploads = async (): Promise<{ key: string; uploadId: string }[]> => {
    const answer = await admin.send(new ListMultipartUploadsCommand({ Bucket: server.bucket, Prefix: location.prefix }));
    return (answer.Uploads ?? []).map((u) => ({ key: (u.Key as string).slice(location.prefix.length), uploadId: u.UploadId as string }));
  };
  return {
    open: () => track(new S3Store(location)),
    location: server.location,
    unfinished: async () => (await uploads()).map((u) => u.key).sort(),
    // The first part is in once the upload is listed and the child's stream has run well past it.
    uploading: async (key) => (await uploads()).some((u) => u.key === key),
    acknowledged: async (key) => {
      const upload = (await uploads()).find((u) => u.key === key);
      if (upload === undefined) return 0;
      const parts = await admin.send(
        new ListPartsCommand({ Bucket: server.bucket, Key: location.prefix + key, UploadId: upload.uploadId }),
      );
      return (parts.Parts ?? []).reduce((sum, p) => sum + (p.Size ?? 0), 0);
    },
    partsOf: async (key) => {
      const head = await admin.send(new HeadObjectCommand({ Bucket: server.bucket, Key: location.prefix + key }));
      const parts = /-(\d+)"?$/.exec(head.ETag ?? '');
      return parts === null ? 1 : Number(parts[1]);
    },
  };
}

function dirSubject(): Subject {
  const partials = (): { key: string; size: number }[] => {
    const found: { key: string; size: number }[] = [];
    const walk = (dir: string): void => {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        const full = path.join(dir, e.name);
        if (e.isDirectory()) walk(full);
        else if (e.name.includes('.partial-'))
          found.push({ key: path.relative(dirRoot, full).replace(/\.partial-.*$/, ''), size: fs.statSync(full).size });
      }
    };
    walk(dirRoot);
    return found;
  };
  return {
    open: () => track(new DirStore(dirRoot)),
    location: dirRoot,
    unfinished: async () =>
      partials()
        .map((p) => p.key)
        .sort(),
    uploading: async (key) => partials().some((p) => p.key === key && p.size >= MiB),
    acknowledged: async (key) => partials().find((p) => p.key === key)?.size ?? 0,
  };
}

describe.each<[string, () => Subject]>([
  ['S3Store on versitygw', s3Subject],
  ['DirStore', dirSubject],
])('%s', (_name, subject) => {
  let s: Subject;
  let store: BackupStore;
  let n = 0;
  // Each test under its own backup name, so none sees another's objects.
  const name = (): string => `20261204T230000.${String(++n).padStart(3, '0')}Z-${randomBytes(3).toString('hex')}`;

  beforeAll(() => {
    s = subject();
    store = s.open();
  });

  it('when a 20 MiB stream is uploaded, then it is listed whole and reads back byte for byte', async () => {
    const key = `${name()}/snapshot.db`;
    const { body, sha256 } = randomStream(20 * MiB);
    await expect(store.upload(key, body)).resolves.toEqual({ sizeBytes: 20 * MiB });
    const sent = sha256();
    // 8 MiB parts: 8 + 8 + 4.
    if (s.partsOf !== undefined) expect(await s.partsOf(key)).toBe(3);
    expect((await store.list(key.split('/')[0])).map((o) => [o.key, o.sizeBytes])).toEqual([[key, 20 * MiB]]);
    expect(await sha256Of(await store.download(key))).toEqual({ sha256: sent, bytes: 20 * MiB });
  });

  it('when 128 MiB is uploaded from a generator, then the generator is never more than two parts ahead of what the store has acknowledged', async () => {
    const key = `${name()}/snapshot.db`;
    const size = 128 * MiB;
    // Before each chunk is handed over: how far what the generator has yielded is ahead of what the store holds.
    const samples: { yielded: number; acknowledged: number }[] = [];
    const body = Readable.from(
      (async function* chunks(): AsyncGenerator<Buffer> {
        for (let yielded = 0; yielded < size;) {
          const acknowledged = await s.acknowledged(key);
          const chunk = randomBytes(MiB);
          yielded += chunk.length;
          samples.push({ yielded, acknowledged });
          yield chunk;
        }
      })(),
      { objectMode: false },
    );
    await expect(store.upload(key, body)).resolves.toEqual({ sizeBytes: size });
    // The store took the stream in as it came, not all at the end.
    expect(samples.some((x) => x.acknowledged > 0 && x.acknowledged < size - PART_SIZE)).toBe(true);
    // One part being sent and one being filled, and the chunk each stream between holds: a store that
    // buffered the stream, or sent parts in parallel, would let the generator run further ahead.
    const ahead = Math.max(...samples.map((x) => x.yielded - x.acknowledged));
    expect(ahead).toBeLessThanOrEqual(2 * PART_SIZE + 2 * MiB);
  });

  it('when an upload is aborted mid-way, then it rejects as a timeout and leaves no object and no unfinished upload', async () => {
    const key = `${name()}/snapshot.db`;
    const abort = new AbortController();
    // Past the first 8 MiB part, so on S3 a multipart upload exists when the signal fires.
    const { body } = randomStream(40 * MiB, (yielded) => yielded >= 12 * MiB && abort.abort());
    const err = await storeError(store.upload(key, body, abort.signal));
    expect(err.failure).toBe<StoreFailure>('timeout');
    expect((await store.list('')).map((o) => o.key)).not.toContain(key);
    expect(await s.unfinished()).not.toContain(key);
  });

  it('when a run was killed mid-upload, then abortUnfinished removes what it left, and only what is older than asked', async () => {
    const before = new Date(Date.now() - 60_000);
    const key = `${name()}/snapshot.db`;
    await killedRun(s.location, key, server.env, () => s.uploading(key));
    expect(await s.unfinished()).toContain(key);
    expect((await store.list('')).map((o) => o.key)).not.toContain(key);
    // Begun after `before`: not old enough to be a killed run's.
    expect(await store.abortUnfinished('', before)).toEqual([]);
    expect(await s.unfinished()).toContain(key);
    expect(await store.abortUnfinished(key.split('/')[0], new Date(Date.now() + 1000))).toEqual([key]);
    expect(await s.unfinished()).not.toContain(key);
  });

  it('when small objects are put, then read answers their bytes, a missing one undefined, and download a not-found', async () => {
    const backup = name();
    await store.put(`${backup}/manifest.json`, Buffer.from('{"first":1}\n'));
    await store.put(`${backup}/manifest.json`, Buffer.from('{"second":2}\n'));
    expect((await store.read(`${backup}/manifest.json`))?.toString()).toBe('{"second":2}\n');
    expect(await store.read(`${backup}/missing.json`)).toBeUndefined();
    expect((await storeError(store.download(`${backup}/missing.json`))).failure).toBe<StoreFailure>('not-found');
    await store.remove([`${backup}/manifest.json`, `${backup}/never-was.json`]);
    expect(await store.read(`${backup}/manifest.json`)).toBeUndefined();
  });

  it(
    'when 1005 objects are listed and removed, then the listing pages and the removal batches cover them all',
    async () => {
      const backup = name();
      const keys = Array.from({ length: 1005 }, (_, i) => `${backup}/part-${String(i).padStart(4, '0')}`);
      for (let at = 0; at < keys.length; at += 50) await Promise.all(keys.slice(at, at + 50).map((k) => store.put(k, Buffer.from(k))));
      const listed = await store.list(`${backup}/`);
      expect(listed.map((o) => o.key)).toEqual(keys);
      expect(listed.every((o) => o.sizeBytes === keys[0].length && Object.prototype.toString.call(o.modifiedAt) === '[object Date]')).toBe(
        true,
      );
      await store.remove(keys);
      expect(await store.list(`${backup}/`)).toEqual([]);
    },
    patience(120_000),
  );
});

describe("S3Store's failures", () => {
  it('when the credentials are wrong, then every call fails as credentials, and no message holds them', async () => {
    for (const wrong of [
      { AWS_ACCESS_KEY_ID: server.accessKey, AWS_SECRET_ACCESS_KEY: `${server.secretKey}x` },
      { AWS_ACCESS_KEY_ID: 'AKIAWRONGKEY0000', AWS_SECRET_ACCESS_KEY: server.secretKey },
    ]) {
      const restore = useCredentials(wrong);
      try {
        const store = track(new S3Store(parseLocation(server.location) as S3Location));
        const failures = [
          await storeError(store.list('')),
          await storeError(store.put('x/manifest.json', Buffer.from('{}'))),
          await storeError(store.upload('x/snapshot.db', randomStream(MiB).body)),
          await storeError(store.read('x/manifest.json')),
        ];
        for (const err of failures) {
          expect(err.failure).toBe<StoreFailure>('credentials');
          expect(err.message).toContain(store.description);
          const shown = `${err.message} ${JSON.stringify(err.details)} ${String(err.cause)} ${JSON.stringify(err.cause)}`;
          for (const secret of [wrong.AWS_ACCESS_KEY_ID, wrong.AWS_SECRET_ACCESS_KEY, server.secretKey])
            expect(shown).not.toContain(secret);
        }
      } finally {
        restore();
      }
    }
  });

  it('when the bucket does not exist, then the calls fail as no-bucket', async () => {
    const store = track(new S3Store({ ...(parseLocation(server.location) as S3Location), bucket: 'no-such-bucket' }));
    // One call at a time: a rejection must not wait unhandled while another is awaited.
    for (const call of [
      () => store.list(''),
      () => store.put('x/manifest.json', Buffer.from('{}')),
      () => store.upload('x/snapshot.db', randomStream(MiB).body),
    ]) {
      const err = await storeError(call());
      expect(err.failure).toBe<StoreFailure>('no-bucket');
      expect(err.message).toContain('s3://no-such-bucket/');
    }
  });

  it('when the server is stopped, then the calls fail as unreachable; when it is back, then they work again', async () => {
    const store = track(new S3Store(parseLocation(server.location) as S3Location));
    await store.put('down-and-back/manifest.json', Buffer.from('{}'));
    await server.stop();
    try {
      for (const call of [
        () => store.list(''),
        () => store.read('down-and-back/manifest.json'),
        () => store.upload('down-and-back/snapshot.db', randomStream(MiB).body),
      ]) {
        const err = await storeError(call());
        expect(err.failure).toBe<StoreFailure>('unreachable');
        expect(err.message).toContain(store.description);
      }
    } finally {
      await server.start();
    }
    expect((await store.read('down-and-back/manifest.json'))?.toString()).toBe('{}');
    await store.remove(['down-and-back/manifest.json']);
  });

  describe('when the store stalls', () => {
    let slow: S3Server;
    beforeAll(async () => {
      slow = await startS3Server({ slow: true });
    }, patience(60_000));
    afterAll(async () => {
      await slow?.close();
    });

    it('then a call with a signal fails as a timeout once its signal fires, and one without it at the request timeout', async () => {
      const restore = useCredentials(slow.env);
      const location = parseLocation(slow.location) as S3Location;
      const store = track(new S3Store(location));
      const shortTimeouts = track(new S3Store(location, { connectMs: 1000, requestMs: 1000 }));
      try {
        await store.put('stalled/manifest.json', Buffer.from('{}'));
        slow.stall();
        for (const call of [
          (signal: AbortSignal) => store.upload('stalled/snapshot.db', randomStream(10 * MiB).body, signal),
          (signal: AbortSignal) => store.download('stalled/manifest.json', signal),
        ]) {
          // The call's deadline, far inside the store's own 60 s request timeout.
          const signal = AbortSignal.timeout(1500);
          const err = await storeError(call(signal));
          expect(signal.aborted).toBe(true);
          expect(err.failure).toBe<StoreFailure>('timeout');
          expect(err.message).toContain("the call's deadline passed");
        }
        const err = await storeError(shortTimeouts.list(''));
        expect(err.failure).toBe<StoreFailure>('timeout');
        expect(err.message).toContain(shortTimeouts.description);
      } finally {
        restore();
      }
    });
  });
});
