/**
 * A real S3 server for the backup store tests: Versity's S3 gateway (versitygw, built from the Go
 * module proxy by scripts/versitygw.sh) serving S3 on a loopback port over a fresh temporary
 * directory (its POSIX backend: a bucket is a folder, an object a file), with one bucket made.
 * `stop()` and `start()` take it down and bring it back on the same port and directory (the store is
 * down, then back); with `slow`, a TcpProxy stands in front of it, so a test can stall the store.
 * The binary is VERSITYGW_BIN when set, else what scripts/versitygw.sh prints (building it when
 * missing); when neither gives one, the start fails saying so.
 */
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePorts } from '../../scripts/ports';
import { ROOT } from './built-agent';
import { eventually, patience } from './eventually';
import { TcpProxy } from './tcp-proxy';

/** How to start the server. */
export interface S3ServerOptions {
  /** The bucket to make (default `backups`). */
  bucket?: string;
  /** The prefix of `location` (default `cluster-a`). */
  prefix?: string;
  /** Put a TcpProxy in front: `endpoint` and `location` then go through it, and `stall()` silences it. */
  slow?: boolean;
}

/** A running versitygw and what a store or a child agent needs to use it. */
export interface S3Server {
  /** The endpoint stores use (the proxy's in slow mode). */
  endpoint: string;
  /** versitygw's own endpoint, past any proxy. */
  directEndpoint: string;
  bucket: string;
  accessKey: string;
  secretKey: string;
  /** `s3://bucket/prefix?endpoint=…&region=us-east-1&path-style=true`. */
  location: string;
  /** The credentials and region for a child agent's environment (the SDK's default chain reads them). */
  env: Record<string, string>;
  /** The directory versitygw serves. */
  root: string;
  /** A client of the server's root user, for the tests' own look at the bucket. */
  client(): S3Client;
  /** Slow mode only: from now on the proxy forwards nothing and new connections hang. */
  stall(): void;
  /** Stops versitygw (SIGTERM, then SIGKILL); the directory stays. */
  stop(): Promise<void>;
  /** Starts it again on the same port and directory and waits until it answers. */
  start(): Promise<void>;
  /** Stops it, closes the proxy and the clients, and removes the directory. */
  close(): Promise<void>;
}

const REGION = 'us-east-1';

/** The versitygw binary: VERSITYGW_BIN, else scripts/versitygw.sh's (which builds it when missing). */
export async function versitygwBinary(): Promise<string> {
  const given = process.env.VERSITYGW_BIN;
  if (given !== undefined && given !== '') {
    if (!fs.existsSync(given)) throw new Error(`VERSITYGW_BIN is ${given}, which does not exist`);
    return given;
  }
  const out = await new Promise<string>((resolve, reject) => {
    execFile('bash', ['scripts/versitygw.sh'], { cwd: ROOT, timeout: 15 * 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`the S3 tests need versitygw, and scripts/versitygw.sh failed: ${String(stderr).trim() || err.message}`));
      else resolve(String(stdout));
    });
  });
  const bin = out.trim().split('\n').pop() ?? '';
  if (!fs.existsSync(bin)) throw new Error(`scripts/versitygw.sh printed "${bin}", which is no versitygw binary`);
  process.env.VERSITYGW_BIN = bin;
  return bin;
}

/** True once something accepts connections on `port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Starts versitygw over a fresh temporary directory and makes the bucket. */
export async function startS3Server(options: S3ServerOptions = {}): Promise<S3Server> {
  const bin = await versitygwBinary();
  const bucket = options.bucket ?? 'backups';
  const prefix = options.prefix ?? 'cluster-a';
  const accessKey = `test${randomBytes(6).toString('hex')}`;
  const secretKey = randomBytes(24).toString('base64url');
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'versitygw-'));
  const [port] = await freePorts(1);
  const directEndpoint = `http://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  let output = '';
  const clients: S3Client[] = [];
  let proxy: TcpProxy | undefined;

  const start = async (): Promise<void> => {
    if (child !== undefined) throw new Error('versitygw is already running');
    output = '';
    // Only what it needs: versitygw reads many settings from the environment (ROOT_ACCESS_KEY, VGW_*).
    const started = spawn(
      bin,
      ['--access', accessKey, '--secret', secretKey, '--port', `127.0.0.1:${port}`, '--region', REGION, '--quiet', 'posix', root],
      {
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: os.homedir(), GOMAXPROCS: '1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child = started;
    for (const stream of [started.stdout, started.stderr])
      stream?.setEncoding('utf8').on('data', (s: string) => (output = (output + s).slice(-8000)));
    let exited: string | undefined;
    started.once('exit', (code, signal) => {
      exited = `exit ${code ?? signal}`;
      if (child === started) child = undefined;
    });
    await eventually(
      async () => {
        if (exited !== undefined) throw new Error(`versitygw ended (${exited}) before it answered:\n${output}`);
        return (await listening(port)) || false;
      },
      { within: 20_000, every: 50 },
    ).catch((err: unknown) => {
      started.kill('SIGKILL');
      throw err;
    });
  };

  const stop = async (): Promise<void> => {
    const running = child;
    if (running === undefined) return;
    const gone = new Promise<void>((resolve) => running.once('exit', () => resolve()));
    running.kill('SIGTERM');
    const timer = setTimeout(() => running.kill('SIGKILL'), patience(10_000));
    await gone;
    clearTimeout(timer);
    child = undefined;
  };

  const client = (): S3Client => {
    const made = new S3Client({
      endpoint: directEndpoint,
      region: REGION,
      forcePathStyle: true,
      credentials: { accessKeyId: accessKey, secretAccessKey: secretKey },
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    clients.push(made);
    return made;
  };

  const close = async (): Promise<void> => {
    for (const c of clients.splice(0)) c.destroy();
    await proxy?.close();
    await stop();
    fs.rmSync(root, { recursive: true, force: true });
  };

  try {
    await start();
    const admin = client();
    await eventually(() => admin.send(new CreateBucketCommand({ Bucket: bucket })), { within: 10_000 });
    if (options.slow === true) proxy = await TcpProxy.start(directEndpoint);
  } catch (err) {
    await close();
    throw err;
  }
  const endpoint = proxy?.url ?? directEndpoint;
  return {
    endpoint,
    directEndpoint,
    bucket,
    accessKey,
    secretKey,
    location: `s3://${bucket}/${prefix}?endpoint=${endpoint}&region=${REGION}&path-style=true`,
    env: { AWS_ACCESS_KEY_ID: accessKey, AWS_SECRET_ACCESS_KEY: secretKey, AWS_REGION: REGION, AWS_EC2_METADATA_DISABLED: 'true' },
    root,
    client,
    stall: () => {
      if (proxy === undefined) throw new Error('stall() needs a server started with { slow: true }');
      proxy.freeze();
    },
    stop,
    start,
    close,
  };
}
