/**
 * What the backup tests judge a backup by, through etcd itself: a writer whose every acknowledged
 * put (key, value, revision) is recorded, and a real etcd started alone on the data a snapshot
 * restores to, whose keys are then read back.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { HttpClient } from '../../scripts/bench/http';
import { baseFlags, etcdInstall } from '../../scripts/etcd-version';
import { freePorts } from './etcd-cluster';
import { eventually } from './eventually';
import { call } from './http-call';

const run = promisify(execFile);

/** One put etcd acknowledged. */
export interface AckedPut {
  key: string;
  value: string;
  revision: number;
}

/** Puts `prefix/<n>` through the gateways of `clientURLs` in turn until stopped; records what etcd acknowledged. */
export class Writer {
  readonly acked: AckedPut[] = [];
  readonly failed: string[] = [];
  private stopped = false;
  private done?: Promise<void>;

  constructor(
    private readonly clientURLs: string[],
    private readonly prefix = 'w',
  ) {}

  /** Starts writing. */
  start(): this {
    this.done = this.loop();
    return this;
  }

  /** Resolves once at least `count` puts were acknowledged since the writer started. */
  async acknowledged(count: number): Promise<void> {
    await eventually(() => this.acked.length >= count, { within: 30_000, every: 50 });
  }

  /** Stops writing and waits for the put in flight. */
  async stop(): Promise<AckedPut[]> {
    this.stopped = true;
    await this.done;
    return this.acked;
  }

  private async loop(): Promise<void> {
    const clients = this.clientURLs.map((u) => new HttpClient(u));
    try {
      for (let i = 0; !this.stopped; i++) {
        const key = `${this.prefix}/${String(i).padStart(6, '0')}`;
        const value = `v${i}`;
        try {
          const answer = await clients[i % clients.length].post(
            '/v3/kv/put',
            { key: Buffer.from(key).toString('base64'), value: Buffer.from(value).toString('base64') },
            5000,
          );
          const revision = Number((answer.body as { header?: { revision?: string } }).header?.revision);
          if (answer.status === 200 && revision > 0) this.acked.push({ key, value, revision });
          else this.failed.push(`${key}: HTTP ${answer.status}`);
        } catch (err) {
          this.failed.push(`${key}: ${(err as Error).message}`);
        }
      }
    } finally {
      for (const c of clients) c.close();
    }
  }
}

/** The restore tool of the etcd version under test: etcdutl from 3.5, etcdctl on 3.4. */
export function restoreToolPath(): string {
  const install = etcdInstall();
  return install.etcdutl ?? install.etcdctl;
}

/** Every key and value of the etcd that the snapshot `file` restores to, read back from a real etcd started on it. */
export async function restoredKeys(file: string): Promise<Map<string, string>> {
  const install = etcdInstall();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'backup-restored-'));
  const [client, peer] = await freePorts(2);
  const peerURL = `http://127.0.0.1:${peer}`;
  const clientURL = `http://127.0.0.1:${client}`;
  let etcd: ChildProcess | undefined;
  try {
    await run(
      restoreToolPath(),
      [
        'snapshot',
        'restore',
        file,
        `--data-dir=${dir}/data`,
        '--name=restored',
        `--initial-cluster=restored=${peerURL}`,
        `--initial-advertise-peer-urls=${peerURL}`,
      ],
      { env: { ...process.env, ETCDCTL_API: '3' } },
    );
    etcd = spawn(
      install.etcd,
      [
        '--name=restored',
        `--data-dir=${dir}/data`,
        `--listen-client-urls=${clientURL}`,
        `--advertise-client-urls=${clientURL}`,
        `--listen-peer-urls=${peerURL}`,
        `--initial-advertise-peer-urls=${peerURL}`,
        `--initial-cluster=restored=${peerURL}`,
        ...baseFlags(install.minor),
      ],
      { stdio: 'ignore' },
    );
    const http = new HttpClient(clientURL);
    try {
      const answer = await eventually(
        async () => {
          const a = await http.post(
            '/v3/kv/range',
            { key: Buffer.from('\0').toString('base64'), range_end: Buffer.from('\0').toString('base64') },
            5000,
          );
          return a.status === 200 ? a : false;
        },
        { within: 30_000 },
      );
      const kvs = (answer.body as { kvs?: { key: string; value?: string }[] }).kvs ?? [];
      return new Map(kvs.map((kv) => [Buffer.from(kv.key, 'base64').toString(), Buffer.from(kv.value ?? '', 'base64').toString()]));
    } finally {
      http.close();
    }
  } finally {
    etcd?.kill('SIGKILL');
    if (etcd !== undefined && etcd.exitCode === null) await new Promise((resolve) => etcd?.once('exit', resolve));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The acknowledged puts at or below `revision` that `keys` lacks or holds another value for. */
export function lostWrites(acked: AckedPut[], revision: number, keys: Map<string, string>): AckedPut[] {
  return acked.filter((w) => w.revision <= revision && keys.get(w.key) !== w.value);
}

/** The Snapshot calls etcd's gRPC server at `clientURL` counts: started, and handled (ended, whatever the code). */
export async function snapshotCalls(clientURL: string): Promise<{ started: number; handled: number }> {
  const text = (await call(clientURL, { method: 'GET', path: '/metrics', timeoutMs: 5000 })).text;
  const counts = { started: 0, handled: 0 };
  for (const line of text.split('\n')) {
    const series = /^grpc_server_(started|handled)_total\{(.*)\} (\S+)$/.exec(line);
    if (series !== null && series[2].includes('grpc_method="Snapshot"')) counts[series[1] as 'started' | 'handled'] += Number(series[3]);
  }
  return counts;
}

/** How many Snapshot calls etcd itself counts as open (started, not yet handled), summed over the members at `clientURLs`. */
export async function openSnapshotCalls(clientURLs: readonly string[]): Promise<number> {
  let open = 0;
  for (const url of clientURLs) {
    const { started, handled } = await snapshotCalls(url);
    open += started - handled;
  }
  return open;
}
