/**
 * The API server of the one-node cluster (scripts/kube.sh), spoken to directly: reads, and watches
 * whose events carry the moment this process saw them. The stories drive the cluster with kubectl,
 * as a user does; they observe it through here, which costs no process per look.
 */
import fs from 'node:fs';
import https from 'node:https';
import { parse } from 'yaml';

/** How to reach the API server: its URL and the credentials of the kubeconfig's current user. */
export interface KubeAccess {
  server: URL;
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

interface Kubeconfig {
  'current-context': string;
  contexts: Array<{ name: string; context: { cluster: string; user: string } }>;
  clusters: Array<{ name: string; cluster: { server: string; 'certificate-authority-data': string } }>;
  users: Array<{ name: string; user: { 'client-certificate-data': string; 'client-key-data': string } }>;
}

/** The access a kubeconfig of client certificates gives (the one kube.sh writes). */
export function accessOf(kubeconfigPath: string): KubeAccess {
  const k = parse(fs.readFileSync(kubeconfigPath, 'utf8')) as Kubeconfig;
  const context = k.contexts.find((c) => c.name === k['current-context'])?.context;
  const cluster = k.clusters.find((c) => c.name === context?.cluster)?.cluster;
  const user = k.users.find((u) => u.name === context?.user)?.user;
  if (cluster === undefined || user === undefined) throw new Error(`${kubeconfigPath}: no cluster and user for its current context`);
  const data = (b64: string): Buffer => Buffer.from(b64, 'base64');
  return {
    server: new URL(cluster.server),
    ca: data(cluster['certificate-authority-data']),
    cert: data(user['client-certificate-data']),
    key: data(user['client-key-data']),
  };
}

/** An API answer that was not a success. */
export class KubeApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
    what: string,
  ) {
    super(`${what}: HTTP ${status}: ${body.slice(0, 500)}`);
  }
}

/** A Kubernetes object, as far as the stories read one. */
export interface KubeObject {
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid: string;
    resourceVersion: string;
    labels?: Record<string, string>;
    deletionTimestamp?: string;
    creationTimestamp?: string;
  };
  // The rest is whatever the kind has; each reader names the fields it looks at.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  spec?: any;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  status?: any;
  [field: string]: unknown;
}

/** A list of objects and the resourceVersion to watch it from. */
interface KubeList {
  metadata: { resourceVersion: string };
  items: KubeObject[];
}

/** A watch event as this process saw it: `at` is Date.now() when it arrived. */
export interface WatchEvent {
  at: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: KubeObject;
}

/** A running watch; `stop()` ends it and its connection. */
export interface Watch {
  stop(): void;
}

/** Reads and watches through one API server. */
export class KubeApi {
  constructor(private readonly access: KubeAccess) {}

  /** One request; the parsed JSON answer, or a KubeApiError for any status but 2xx. */
  async request<T>(method: string, path: string, body?: unknown, timeoutMs = 15_000): Promise<T> {
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = https.request(
        new URL(path, this.access.server),
        {
          method,
          ca: this.access.ca,
          cert: this.access.cert,
          key: this.access.key,
          agent: false,
          timeout: timeoutMs,
          headers: body === undefined ? { Accept: 'application/json' } : { Accept: 'application/json', 'Content-Type': 'application/json' },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });
    if (status < 200 || status > 299) throw new KubeApiError(status, text, `${method} ${path}`);
    return JSON.parse(text) as T;
  }

  /** GET `path`. */
  get<T = KubeObject>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  /** The items of the list at `path` (a collection, with an optional `?labelSelector=` and the like). */
  async list(path: string): Promise<KubeObject[]> {
    return (await this.get<KubeList>(path)).items;
  }

  /** Whether `path` names an object that exists now. */
  async exists(path: string): Promise<boolean> {
    try {
      await this.get(path);
      return true;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return false;
      throw err;
    }
  }

  /**
   * Watches the collection at `path`: each object already there first, as ADDED, then every change
   * as it comes. A broken connection is watched again from the last version seen (listed again when
   * the API server no longer has it: 410), so no change is missed while the watch runs.
   */
  watch(path: string, onEvent: (e: WatchEvent) => void): Watch {
    let stopped = false;
    let req: ReturnType<typeof https.request> | undefined;
    let pause: { timer: NodeJS.Timeout; resolve: () => void } | undefined;
    let version: string | undefined;
    const known = new Map<string, KubeObject>();

    const relist = async (): Promise<void> => {
      const list = await this.get<KubeList>(path);
      const at = Date.now();
      const present = new Set(list.items.map((o) => o.metadata.uid));
      for (const [uid, object] of known) {
        if (!present.has(uid)) {
          known.delete(uid);
          onEvent({ at, type: 'DELETED', object });
        }
      }
      for (const object of list.items) {
        const before = known.get(object.metadata.uid);
        known.set(object.metadata.uid, object);
        if (before?.metadata.resourceVersion !== object.metadata.resourceVersion)
          onEvent({ at, type: before === undefined ? 'ADDED' : 'MODIFIED', object });
      }
      version = list.metadata.resourceVersion;
    };

    const stream = (): Promise<'again' | 'relist'> =>
      new Promise((resolve) => {
        const sep = path.includes('?') ? '&' : '?';
        req = https.request(
          new URL(`${path}${sep}watch=true&resourceVersion=${version}`, this.access.server),
          { method: 'GET', ca: this.access.ca, cert: this.access.cert, key: this.access.key, agent: false },
          (res) => {
            if (res.statusCode === 410) {
              res.resume();
              resolve('relist');
              return;
            }
            let pending = '';
            let outcome: 'again' | 'relist' = 'again';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => {
              pending += chunk;
              for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
                const line = pending.slice(0, nl);
                pending = pending.slice(nl + 1);
                if (line.trim() === '') continue;
                const e = JSON.parse(line) as { type: string; object: KubeObject & { code?: number } };
                if (e.type === 'ERROR') {
                  outcome = e.object.code === 410 ? 'relist' : 'again';
                  continue;
                }
                if (e.type === 'BOOKMARK') continue;
                const type = e.type as WatchEvent['type'];
                version = e.object.metadata.resourceVersion;
                if (type === 'DELETED') known.delete(e.object.metadata.uid);
                else known.set(e.object.metadata.uid, e.object);
                onEvent({ at: Date.now(), type, object: e.object });
              }
            });
            res.on('error', () => resolve(outcome));
            res.on('end', () => resolve(outcome));
            res.on('close', () => resolve(outcome));
          },
        );
        req.on('error', () => resolve('again'));
        req.end();
      });

    void (async () => {
      let mode: 'again' | 'relist' = 'relist';
      while (!stopped) {
        try {
          if (mode === 'relist') await relist();
          if (stopped) break;
          mode = await stream();
        } catch {
          mode = 'relist';
        }
        // A failing API server is asked again, not hammered.
        if (!stopped) await new Promise<void>((resolve) => (pause = { timer: setTimeout(resolve, 200), resolve }));
      }
    })();

    return {
      stop: () => {
        stopped = true;
        req?.destroy();
        if (pause !== undefined) {
          clearTimeout(pause.timer);
          pause.resolve();
        }
      },
    };
  }
}
