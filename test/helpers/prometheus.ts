/**
 * A real Prometheus (Debian's `prometheus`) for a test: its own data directory under the system
 * temp dir, its own loopback port (never the system service's 9090), the project's rule files,
 * and short scrape and evaluation intervals. The caller stops it (afterAll); the kernel kills it
 * if this process dies first (setpriv --pdeathsig, as local-cluster.ts does for etcd).
 */
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { freePort } from '../../scripts/ports';
import { patience } from './eventually';
import { call } from './http-call';

/** What to run Prometheus with. */
export interface PrometheusOptions {
  /** host:port of each agent to scrape, as job `etcd-lifecycle-agent`. */
  targets: string[];
  /** Labels every target gets, e.g. `{namespace: 'itest'}` (a ServiceMonitor would set them). */
  labels?: Record<string, string>;
  /** Absolute paths of rule files. */
  ruleFiles: string[];
  scrapeIntervalSeconds: number;
  evaluationIntervalSeconds: number;
}

/** One alert as GET /api/v1/alerts shows it. */
export interface ActiveAlert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
  value: string;
}

/** A running Prometheus. */
export class TestPrometheus {
  private constructor(
    private readonly child: ChildProcess,
    private readonly dir: string,
    readonly url: string,
    private readonly exited: Promise<void>,
    private readonly logFile: string,
  ) {}

  /** Starts Prometheus and waits until /-/ready answers 200 (retrying on a port taken meanwhile). */
  static async start(options: PrometheusOptions, timeoutMs = 30_000): Promise<TestPrometheus> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prometheus-test-'));
    const config = {
      global: {
        scrape_interval: `${options.scrapeIntervalSeconds}s`,
        scrape_timeout: `${options.scrapeIntervalSeconds}s`,
        evaluation_interval: `${options.evaluationIntervalSeconds}s`,
      },
      rule_files: options.ruleFiles,
      scrape_configs: [
        {
          job_name: 'etcd-lifecycle-agent',
          static_configs: [{ targets: options.targets, labels: options.labels ?? {} }],
        },
      ],
    };
    const configFile = path.join(dir, 'prometheus.yml');
    fs.writeFileSync(configFile, stringify(config));
    const check = spawnSync('promtool', ['check', 'config', configFile], { encoding: 'utf8' });
    if (check.status !== 0) throw new Error(`promtool check config failed: ${check.stdout}${check.stderr}`);

    const deadline = Date.now() + patience(timeoutMs);
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      const logFile = path.join(dir, `prometheus-${attempt}.log`);
      const { child, exited } = spawnPrometheus(dir, configFile, port, logFile);
      const prometheus = new TestPrometheus(child, dir, `http://127.0.0.1:${port}`, exited, logFile);
      if (await prometheus.waitReady(deadline)) return prometheus;
      await prometheus.stop(false);
      const log = fs.readFileSync(logFile, 'utf8');
      if (!/address already in use/.test(log) || Date.now() > deadline) {
        fs.rmSync(dir, { recursive: true, force: true });
        throw new Error(`prometheus did not become ready:\n${log.split('\n').slice(-15).join('\n')}`);
      }
    }
  }

  /** Alerts pending or firing now (GET /api/v1/alerts). */
  async alerts(): Promise<ActiveAlert[]> {
    const answer = await call(this.url, { method: 'GET', path: '/api/v1/alerts', timeoutMs: 5000 });
    if (answer.status !== 200) throw new Error(`/api/v1/alerts answered ${answer.status}: ${answer.text}`);
    return answer.json.data.alerts as ActiveAlert[];
  }

  /** An instant query; each result as its labels and value. */
  async query(expr: string): Promise<Array<{ metric: Record<string, string>; value: number }>> {
    const answer = await call(this.url, { method: 'GET', path: `/api/v1/query?query=${encodeURIComponent(expr)}`, timeoutMs: 5000 });
    if (answer.status !== 200) throw new Error(`query ${expr} answered ${answer.status}: ${answer.text}`);
    const result = answer.json.data.result as Array<{ metric: Record<string, string>; value: [number, string] }>;
    return result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
  }

  /** The raw samples of `selector` over the last `seconds` (a range-vector query): [unix seconds, value]. */
  async range(selector: string, seconds: number): Promise<Array<{ metric: Record<string, string>; values: Array<[number, string]> }>> {
    const expr = `${selector}[${seconds}s]`;
    const answer = await call(this.url, { method: 'GET', path: `/api/v1/query?query=${encodeURIComponent(expr)}`, timeoutMs: 5000 });
    if (answer.status !== 200) throw new Error(`query ${expr} answered ${answer.status}: ${answer.text}`);
    return answer.json.data.result as Array<{ metric: Record<string, string>; values: Array<[number, string]> }>;
  }

  /** The last lines of its log, for a failure message. */
  logTail(lines = 20): string {
    return fs.readFileSync(this.logFile, 'utf8').split('\n').slice(-lines).join('\n');
  }

  /** Stops it (SIGTERM, then SIGKILL after 5 s) and, when `removeDir`, removes its directory. */
  async stop(removeDir = true): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(timer);
    if (removeDir) fs.rmSync(this.dir, { recursive: true, force: true });
  }

  private async waitReady(deadline: number): Promise<boolean> {
    while (Date.now() < deadline && this.child.exitCode === null && this.child.signalCode === null) {
      const ready = await call(this.url, { method: 'GET', path: '/-/ready', timeoutMs: 1000 }).catch(() => undefined);
      if (ready?.status === 200) return true;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return false;
  }
}

function spawnPrometheus(dir: string, configFile: string, port: number, logFile: string): { child: ChildProcess; exited: Promise<void> } {
  const args = [
    `--config.file=${configFile}`,
    `--storage.tsdb.path=${path.join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`,
    // Debian's defaults point at /usr/share/prometheus consoles; none are needed here.
    `--web.console.templates=${dir}`,
    `--web.console.libraries=${dir}`,
  ];
  const log = fs.openSync(logFile, 'a');
  try {
    const setpriv = spawnSync('sh', ['-c', 'command -v setpriv'], { encoding: 'utf8' }).stdout.trim();
    const [cmd, argv] = setpriv !== '' ? [setpriv, ['--pdeathsig=KILL', '--', 'prometheus', ...args]] : ['prometheus', args];
    const child = spawn(cmd, argv, { stdio: ['ignore', log, log] });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    return { child, exited };
  } finally {
    fs.closeSync(log);
  }
}
