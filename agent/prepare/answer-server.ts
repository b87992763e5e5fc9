/**
 * The small read-only answer a waiting `prepare` gives the other initial
 * members' prepare steps: `GET /v1/prepare` → this pod's name, whether its
 * data directory is empty, the bootstrap it has decided, if any, and the
 * restore it was asked for, if any, with the initial cluster it was given
 * (backup/restore-decision.ts). It is
 * served on the agent's own port, which is free while prepare runs (an init
 * container runs before the sidecar), and read by `askPeers`.
 *
 * Invariant: the answer is recomputed on every request from the data
 * directory and the marker, never cached, so a peer never reads an old state.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from '../lib/http-request';
import type { RestoreAsk } from '../backup/restore-decision';
import type { BootstrapPlan, InitialMember, PeerAnswer } from './decide';
import type { DataDirState } from '../etcd-data/data-dir';

/** The route the answer is served on. */
export const PREPARE_ANSWER_PATH = '/v1/prepare';

/** What `GET /v1/prepare` answers. */
export interface PrepareAnswer {
  name: string;
  dataDir: DataDirState['kind'];
  bootstrap: BootstrapPlan | null;
  /** The restore this pod was asked for; absent from an older agent's answer, which counts as none. */
  restore?: RestoreAsk | null;
}

/** A listening answer server. */
export interface AnswerServer {
  port: number;
  close(): Promise<void>;
}

/** Serves `answer()` on `host:port` (port 0: any free one). */
export function serveAnswer(host: string, port: number, answer: () => PrepareAnswer): Promise<AnswerServer> {
  const server = http.createServer((req, res) => {
    const ok = req.method === 'GET' && (req.url ?? '').split('?')[0] === PREPARE_ANSWER_PATH;
    let status = 404;
    let body: unknown = { error: { code: 'not-found', message: `only GET ${PREPARE_ANSWER_PATH} is served while prepare runs` } };
    if (ok) {
      try {
        body = answer();
        status = 200;
      } catch (err) {
        status = 500;
        body = { error: { code: 'internal', message: err instanceof Error ? err.message : String(err) } };
      }
    }
    res.writeHead(status, { 'content-type': 'application/json', connection: 'close' });
    res.end(JSON.stringify(body));
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve({
        port: (server.address() as AddressInfo).port,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

/**
 * Asks each of `members`' prepare for its answer, at `http://<host of its peer URL>:<port>` (the
 * agent port of its pod), each within `timeoutMs`; a member that does not answer, or answers as
 * someone else, is `no-answer`.
 */
export async function askPeers(members: InitialMember[], port: number, timeoutMs: number): Promise<Map<string, PeerAnswer>> {
  const answers = await Promise.all(members.map(async (m): Promise<[string, PeerAnswer]> => [m.name, await askOne(m, port, timeoutMs)]));
  return new Map(answers);
}

async function askOne(member: InitialMember, port: number, timeoutMs: number): Promise<PeerAnswer> {
  const url = new URL(member.peerURL);
  const target = `http://${url.host.replace(/:\d+$/, '')}:${port}${PREPARE_ANSWER_PATH}`;
  let body: unknown;
  try {
    const res = await request(target, { timeoutMs, headers: { Accept: 'application/json' } });
    if (res.status !== 200) return { kind: 'no-answer', detail: `its agent port answers HTTP ${res.status}: no prepare is waiting there` };
    body = JSON.parse(res.text);
  } catch (err) {
    return { kind: 'no-answer', detail: `no prepare answers at ${target}: ${err instanceof Error ? err.message : String(err)}` };
  }
  return classifyAnswer(member.name, body);
}

/**
 * What a peer's `GET /v1/prepare` body says, for the bootstrap and restore decisions. Only a
 * well-formed answer from the member asked counts as "empty", "bootstrap" or "restore"; anything
 * else counts against bootstrapping and restoring.
 */
export function classifyAnswer(name: string, body: unknown): PeerAnswer {
  const answer = (typeof body === 'object' && body !== null ? body : {}) as Partial<PrepareAnswer>;
  if (answer.name !== name) return { kind: 'no-answer', detail: `the answer is not ${name}'s (${String(answer.name)})` };
  if (answer.dataDir !== 'empty') return { kind: 'has-data', detail: `its data directory is ${String(answer.dataDir)}` };
  // Asked to restore, it never bootstraps `new` whatever marker it holds: the restore is its answer.
  const restore: unknown = answer.restore;
  if (restore !== undefined && restore !== null) {
    const ask = restore as Partial<RestoreAsk>;
    if (
      typeof ask.source !== 'string' ||
      (ask.backup !== undefined && typeof ask.backup !== 'string') ||
      (ask.initialCluster !== undefined && typeof ask.initialCluster !== 'string')
    ) {
      return { kind: 'no-answer', detail: 'its restore is malformed' };
    }
    return {
      kind: 'restore',
      restore: {
        source: ask.source,
        ...(ask.backup === undefined ? {} : { backup: ask.backup }),
        ...(ask.initialCluster === undefined ? {} : { initialCluster: ask.initialCluster }),
      },
    };
  }
  const plan = answer.bootstrap;
  if (plan === null) return { kind: 'empty' };
  if (typeof plan === 'object' && plan !== undefined && typeof plan.initialCluster === 'string' && typeof plan.token === 'string') {
    return { kind: 'bootstrap', plan: { initialCluster: plan.initialCluster, token: plan.token } };
  }
  return { kind: 'no-answer', detail: 'its answer is malformed' };
}
