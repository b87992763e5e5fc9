/**
 * The member list as etcd serves it to its peers: `GET <peer URL>/members` on the peer listener.
 * Every member serves it, a learner too, which refuses MemberList and linearizable reads on its
 * client port (etcd 3.4). So a learner's own agent, configured with its own member only, finds the
 * voters here. Ids are bare uint64 JSON numbers, which `JSON.parse` would round: they are read as
 * text (see /work/shared/ETCD-FACTS.md).
 */
import * as fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { Member } from '../proto/types';

/** TLS material for a peer listener served over https (the etcd client CA and certificate, when set). */
export interface PeerTls {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
}

/** Largest answer read: a member list is a few hundred bytes a member. */
const MAX_BYTES = 1 << 20;

/** Parses the peer listener's `/members` answer; ids become lowercase hex, as etcdctl prints them. */
export function parsePeerMembers(text: string): Member[] {
  // Quote the bare uint64 ids before JSON.parse sees them (only an "id" key, only a bare number).
  const quoted = text.replace(/([{,]\s*"id"\s*:\s*)(\d+)/g, '$1"$2"');
  const parsed: unknown = JSON.parse(quoted);
  if (!Array.isArray(parsed)) throw new Error('the peer member list is not a JSON array');
  return parsed.map((raw: unknown) => {
    const m = (raw ?? {}) as { id?: unknown; name?: unknown; peerURLs?: unknown; clientURLs?: unknown; isLearner?: unknown };
    if (typeof m.id !== 'string' || !/^\d+$/.test(m.id)) throw new Error('a member of the peer member list has no numeric id');
    const name = typeof m.name === 'string' ? m.name : '';
    return {
      id: BigInt(m.id).toString(16),
      name,
      peerURLs: strings(m.peerURLs),
      clientURLs: strings(m.clientURLs),
      isLearner: m.isLearner === true,
      started: name !== '',
    };
  });
}

/** GET `<peerURL>/members` within `timeoutMs`; rejects on any failure. */
export function fetchPeerMembers(peerURL: string, timeoutMs: number, tls: PeerTls = {}): Promise<Member[]> {
  const url = new URL('/members', peerURL);
  const secure = url.protocol === 'https:';
  const options = secure
    ? {
        ...(tls.caFile === undefined ? {} : { ca: fs.readFileSync(tls.caFile) }),
        ...(tls.certFile === undefined || tls.keyFile === undefined ? {} : { cert: fs.readFileSync(tls.certFile), key: fs.readFileSync(tls.keyFile) }),
      }
    : {};
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).get(url, { agent: false, timeout: timeoutMs, ...options }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
        if (body.length > MAX_BYTES) req.destroy(new Error('the peer member list is too large'));
      });
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new Error(`${url.href} answered HTTP ${res.statusCode}`));
        try {
          resolve(parsePeerMembers(body));
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${url.href}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
  });
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}
