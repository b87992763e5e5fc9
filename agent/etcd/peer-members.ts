/**
 * The member list as etcd serves it to its peers: `GET <peer URL>/members` on the peer listener.
 * Every member serves it, a learner too, which refuses MemberList and linearizable reads on its
 * client port (etcd 3.4). So a learner's own agent, configured with its own member only, finds the
 * voters here. Ids are bare uint64 JSON numbers, which `JSON.parse` would round: they are read as
 * text (see /work/shared/ETCD-FACTS.md).
 */
import { getText, tlsFromFiles, type TlsFiles } from '../lib/http-request';
import type { Member } from '../proto/types';

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
export async function fetchPeerMembers(peerURL: string, timeoutMs: number, tls: TlsFiles = {}): Promise<Member[]> {
  const url = new URL('/members', peerURL).href;
  return parsePeerMembers(await getText(url, { timeoutMs, maxBytes: MAX_BYTES, tls: tlsFromFiles(url, tls) }));
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}
