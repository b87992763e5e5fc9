/**
 * The `backup` section: the agent's backup into S3 (POST /v1/backups without its verification: the
 * Snapshot RPC of a follower streamed into a multipart upload) against what an operator does by hand,
 * `etcdctl snapshot save` of the same member to a file followed by `aws s3 cp` of that file, into the
 * same S3 server (versitygw, scripts/versitygw.sh, on loopback), on the same data, in the same run.
 * Rounds alternate (agent, by hand, agent, …) so neither gets the quieter half of a shared machine.
 *
 * The baseline needs the AWS CLI: Debian's `awscli`. When `aws` is missing the section says so and,
 * run as root on Debian, installs it (apt-get install awscli); otherwise it fails naming the package.
 * The CLI gets the agent's credentials and checksum setting (only where S3 requires one), and
 * path-style addressing, as the agent's store URL asks.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { etcdInstall } from '../etcd-version';
import type { LocalEtcdCluster } from '../local-cluster';
import { freePort } from '../ports';
import { AgentProcess } from './agent-process';
import { pick, type BenchContext } from './context';
import { HttpClient } from './http';
import { median, round, sleep, summarize } from './stats';

const run = promisify(execFile);
const MiB = 1024 * 1024;
const REGION = 'us-east-1';
const BUCKET = 'bench';

/** A versitygw serving a scratch directory, with what a client needs. */
interface S3Gateway {
  endpoint: string;
  env: Record<string, string>;
  stop(): Promise<void>;
}

/** Starts versitygw (built by scripts/versitygw.sh when missing) over `root`, with one bucket. */
async function startGateway(ctx: BenchContext, root: string): Promise<S3Gateway> {
  const bin = execFileSync('bash', [path.join(__dirname, '../../../scripts/versitygw.sh')], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .pop();
  if (bin === undefined || !fs.existsSync(bin)) throw new Error(`scripts/versitygw.sh printed no versitygw binary (${bin})`);
  const accessKey = `bench${randomBytes(4).toString('hex')}`;
  const secretKey = randomBytes(24).toString('base64url');
  // versitygw's POSIX backend: a bucket is a directory of its root.
  fs.mkdirSync(path.join(root, BUCKET), { recursive: true });
  const port = await freePort();
  const child: ChildProcess = spawn(
    bin,
    ['--access', accessKey, '--secret', secretKey, '--port', `127.0.0.1:${port}`, '--region', REGION, '--quiet', 'posix', root],
    { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/' }, stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  for (let tries = 0; !(await accepts(port)); tries++) {
    if (child.exitCode !== null || tries > 200) throw new Error(`versitygw did not listen on ${port}`);
    await sleep(50);
  }
  ctx.log(`versitygw on 127.0.0.1:${port} over ${root}`);
  return {
    endpoint: `http://127.0.0.1:${port}`,
    env: {
      AWS_ACCESS_KEY_ID: accessKey,
      AWS_SECRET_ACCESS_KEY: secretKey,
      AWS_REGION: REGION,
      AWS_DEFAULT_REGION: REGION,
      AWS_EC2_METADATA_DISABLED: 'true',
    },
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

/** The `aws` command's version line; installs Debian's awscli when it is missing and this runs as root. */
async function awsCli(ctx: BenchContext): Promise<string> {
  const version = async (): Promise<string | undefined> =>
    run('aws', ['--version']).then(
      ({ stdout, stderr }) => `${stdout}${stderr}`.trim(),
      () => undefined,
    );
  const found = await version();
  if (found !== undefined) return found;
  if (process.getuid?.() !== 0 || !fs.existsSync('/usr/bin/apt-get'))
    throw new Error('the backup section compares with `aws s3 cp`: install the AWS CLI (Debian: apt-get install awscli)');
  ctx.log("backup: no `aws` on PATH; installing Debian's awscli (apt-get install -y awscli)");
  await run('apt-get', ['install', '-y', '--no-install-recommends', 'awscli'], {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  const installed = await version();
  if (installed === undefined) throw new Error('apt-get installed awscli, but `aws --version` still does not answer');
  return installed;
}

/** Writes `total` bytes as values of 1 MiB under `bench/backup/`, four puts at a time. */
async function fill(clientURL: string, total: number): Promise<void> {
  const http = new HttpClient(clientURL, 4);
  try {
    const count = Math.ceil(total / MiB);
    for (let at = 0; at < count; at += 4) {
      await Promise.all(
        Array.from({ length: Math.min(4, count - at) }, async (_, j) => {
          const value = randomBytes(MiB).toString('base64');
          const key = Buffer.from(`bench/backup/${String(at + j).padStart(6, '0')}`).toString('base64');
          const answer = await http.post('/v3/kv/put', { key, value }, 60_000);
          if (answer.status !== 200) throw new Error(`put: HTTP ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`);
        }),
      );
    }
  } finally {
    http.close();
  }
}

/** One timed backup: how long it took, what it sent, and of which member. */
interface Round {
  how: 'agent' | 'by hand';
  ms: number;
  bytes: number;
  member: string;
  /** By hand only: the two commands' own times. */
  saveMs?: number;
  copyMs?: number;
}

/** The agent's backup, without its verification; its source member's name comes from the manifest. */
async function agentRound(agent: AgentProcess): Promise<Round> {
  const started = performance.now();
  const answer = await agent.http.post('/v1/backups', { verify: false, timeoutSeconds: 60 }, 70_000);
  const ms = performance.now() - started;
  const manifest = (answer.body as { manifest?: { sizeBytes: number; member: { name: string } } }).manifest;
  if (answer.status !== 200 || manifest === undefined)
    throw new Error(
      `POST /v1/backups answered ${answer.status} (a database too big for one call's 60 s?): ${JSON.stringify(answer.body).slice(0, 500)}`,
    );
  return { how: 'agent', ms, bytes: manifest.sizeBytes, member: manifest.member.name };
}

/** `etcdctl snapshot save` of `member`, then `aws s3 cp` of the file into the same bucket. */
async function byHandRound(ctx: BenchContext, member: { name: string; clientURL: string }, gateway: S3Gateway, n: number): Promise<Round> {
  const file = path.join(ctx.workDir, `by-hand-${n}.db`);
  const env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ETCD') && !k.startsWith('AWS_'))),
    ...gateway.env,
    ETCDCTL_API: '3',
    AWS_CONFIG_FILE: path.join(ctx.workDir, 'aws-config'),
    AWS_REQUEST_CHECKSUM_CALCULATION: 'when_required',
    AWS_RESPONSE_CHECKSUM_VALIDATION: 'when_required',
  };
  const started = performance.now();
  await run(etcdInstall().etcdctl, [`--endpoints=${member.clientURL}`, 'snapshot', 'save', file], { env, maxBuffer: 16 * MiB });
  const saved = performance.now();
  await run('aws', ['s3', 'cp', '--only-show-errors', '--endpoint-url', gateway.endpoint, file, `s3://${BUCKET}/by-hand/${n}.db`], {
    env,
    maxBuffer: 16 * MiB,
  });
  const done = performance.now();
  const bytes = fs.statSync(file).size;
  fs.rmSync(file);
  // Only the newest copy is kept, as the agent keeps only its newest backup: the same disk for both.
  if (n > 0)
    await run('aws', ['s3', 'rm', '--only-show-errors', '--endpoint-url', gateway.endpoint, `s3://${BUCKET}/by-hand/${n - 1}.db`], { env });
  return { how: 'by hand', ms: done - started, bytes, member: member.name, saveMs: saved - started, copyMs: done - saved };
}

/** Runs the section on `cluster` (3 members). */
export async function measureBackup(ctx: BenchContext, cluster: LocalEtcdCluster): Promise<void> {
  const section = 'backup into S3';
  const rounds = pick(ctx, 3, 1);
  const size = pick(ctx, 384 * MiB, 48 * MiB);
  const cli = await awsCli(ctx);
  ctx.log(`backup: baseline with ${cli.split('\n')[0]}`);
  fs.writeFileSync(path.join(ctx.workDir, 'aws-config'), `[default]\nregion = ${REGION}\ns3 =\n  addressing_style = path\n`);
  const gateway = await startGateway(ctx, path.join(ctx.workDir, 's3'));
  const endpoints = cluster.clientURLs();
  const agent = await AgentProcess.start({
    endpoints,
    localEndpoint: endpoints[0],
    memberName: cluster.members[0].name,
    workDir: ctx.workDir,
    label: 'backup-etcd-0',
    node: ctx.node,
    env: {
      ...gateway.env,
      ETCD_AGENT_BACKUP_STORE: `s3://${BUCKET}/agent?endpoint=${gateway.endpoint}&region=${REGION}&path-style=true`,
      ETCD_AGENT_BACKUP_KEEP_LAST: '1',
    },
  });
  try {
    ctx.log(`backup: writing ${size / MiB} MiB of 1 MiB values`);
    await fill(cluster.members[0].clientURL, size);
    const results: Round[] = [];
    for (let i = 0; i < rounds; i++) {
      const own = await agentRound(agent);
      // By hand from the member the agent chose (a follower), so both read the same member's backend.
      const source = cluster.members.find((m) => m.name === own.member);
      if (source === undefined) throw new Error(`the agent's backup came from ${own.member}, not a member of the cluster`);
      const hand = await byHandRound(ctx, source, gateway, i);
      results.push(own, hand);
      ctx.log(
        `backup round ${i + 1}: agent ${round(own.ms)} ms for ${round(own.bytes / MiB)} MiB; by hand ${round(hand.ms)} ms (save ${round(hand.saveMs ?? 0)} + copy ${round(hand.copyMs ?? 0)})`,
      );
    }
    const of = (how: Round['how'], pickOne: (r: Round) => number): number[] => results.filter((r) => r.how === how).map(pickOne);
    const agentMs = median(of('agent', (r) => r.ms));
    const handMs = median(of('by hand', (r) => r.ms));
    const mib = median(of('agent', (r) => r.bytes)) / MiB;
    ctx.rows.push({
      section,
      figure: `backup of a ${round(mib)} MiB database into S3, median of ${rounds}`,
      value: round(agentMs),
      unit: 'ms',
      baseline: { name: 'etcdctl snapshot save, then aws s3 cp', value: round(handMs), unit: 'ms' },
      ratio: { value: round(agentMs / handMs, 3), of: 'agent ÷ by hand' },
      detail: {
        agent: summarize(of('agent', (r) => r.ms)),
        byHand: summarize(of('by hand', (r) => r.ms)),
        save: summarize(of('by hand', (r) => r.saveMs ?? 0)),
        copy: summarize(of('by hand', (r) => r.copyMs ?? 0)),
        bytes: summarize(of('agent', (r) => r.bytes)),
      },
    });
    ctx.rows.push({
      section,
      figure: 'throughput, snapshot to an object in the store',
      value: round(mib / (agentMs / 1000), 1),
      unit: 'MiB/s',
      baseline: { name: 'by hand', value: round(mib / (handMs / 1000), 1), unit: 'MiB/s' },
      ratio: { value: round(handMs / agentMs, 3), of: 'agent ÷ by hand' },
    });
    ctx.notes.push(
      `backup: ${size / MiB} MiB of 1 MiB values in a 3-member cluster; the agent's POST /v1/backups {"verify": false} (a follower's Snapshot RPC streamed into an S3 multipart upload, two 8 MiB parts in memory) against \`etcdctl snapshot save\` of the same member to a file then \`aws s3 cp\` of it (${cli.split('\n')[0]}), both into one versitygw on loopback; rounds alternate agent, by hand.`,
    );
  } finally {
    await agent.stop();
    await gateway.stop();
  }
}
