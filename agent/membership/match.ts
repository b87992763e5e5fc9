/**
 * Peer URL normalising and member matching (CONTRACT §3). Pure: no I/O, no etcd.
 *
 * Two URL checks, on purpose:
 * - `validatePeerUrl` is the strict rule for URLs a caller sends (CONTRACT §4, last paragraph):
 *   http or https, a host, an explicit port, nothing else.
 * - `normalizeUrl` is the lenient form used to compare URLs: it also accepts a missing port
 *   (the scheme's default), since etcd reports URLs as its members were configured.
 * Both return the same normal form: `scheme://host:port`, scheme and host lowercased,
 * IPv6 hosts in brackets in canonical (compressed) form, no trailing slash.
 */
import { AgentError } from '../proto/errors';
import type { ClusterSummary, Member, Phase } from '../proto/types';

const DEFAULT_PORTS: Readonly<Record<string, number>> = { http: 80, https: 443 };

// scheme "://" authority rest; the authority ends at the first "/", "?", "#" or "\"
// (WHATWG parsers treat "\" as "/" in http URLs, so it may not hide inside a host).
const URL_SHAPE = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#\\]*)(.*)$/s;
// A DNS name or an IPv4 address; underscores appear in some real host names.
const REG_NAME = /^[A-Za-z0-9._-]+$/;
const IPV6_LITERAL = /^\[([0-9A-Fa-f:.]+)\]$/;
const PORT = /^[0-9]{1,5}$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const HEX_ID = /^(?:0x)?0*([0-9a-fA-F]{1,16})$/;

function badUrl(raw: string, why: string): AgentError {
  return new AgentError('bad-request', `peer URL ${JSON.stringify(raw)} ${why}`, { details: { url: raw } });
}

/** Canonical host: lowercase name or IPv4 as written, IPv6 compressed inside brackets. */
function normalizeHost(raw: string, host: string): string {
  if (host === '') throw badUrl(raw, 'has no host');
  if (host.startsWith('[')) {
    if (!IPV6_LITERAL.test(host)) throw badUrl(raw, 'has an invalid IPv6 host');
    try {
      // WHATWG's IPv6 parser validates and compresses ([0:0::1] → [::1]).
      return new URL(`http://${host}/`).hostname;
    } catch {
      throw badUrl(raw, 'has an invalid IPv6 host');
    }
  }
  if (!REG_NAME.test(host)) throw badUrl(raw, 'has an invalid host');
  return host.toLowerCase();
}

function parseUrl(raw: string, requirePort: boolean): string {
  const shape = URL_SHAPE.exec(raw);
  if (shape === null) throw badUrl(raw, 'is not an http or https URL with a host');
  const [, rawScheme, authority, rest] = shape as unknown as [string, string, string, string];
  const scheme = rawScheme.toLowerCase();
  const defaultPort = DEFAULT_PORTS[scheme];
  if (defaultPort === undefined) throw badUrl(raw, 'must use http or https');
  if (authority.includes('@')) throw badUrl(raw, 'must not carry a user');
  if (rest.includes('?')) throw badUrl(raw, 'must not carry a query');
  if (rest.includes('#')) throw badUrl(raw, 'must not carry a fragment');
  if (rest !== '' && rest !== '/') throw badUrl(raw, 'must not carry a path');

  // An IPv6 host is bracketed; any other colon separates the port.
  const portAt = authority.startsWith('[') ? authority.indexOf(':', authority.indexOf(']')) : authority.indexOf(':');
  const host = portAt === -1 ? authority : authority.slice(0, portAt);
  const rawPort = portAt === -1 ? undefined : authority.slice(portAt + 1);
  const canonicalHost = normalizeHost(raw, host);

  let port = defaultPort;
  if (rawPort === undefined) {
    if (requirePort) throw badUrl(raw, 'must name a port');
  } else {
    if (!PORT.test(rawPort)) throw badUrl(raw, 'has an invalid port');
    port = Number(rawPort);
    if (port < 1 || port > 65535) throw badUrl(raw, 'has a port outside 1-65535');
  }
  return `${scheme}://${canonicalHost}:${port}`;
}

/**
 * Lenient normal form for comparing URLs (e.g. those etcd reports): a missing port becomes the
 * scheme's default (http 80, https 443). Throws AgentError `bad-request` for anything that is not
 * http/https with a host, or that carries a user, a path other than "/", a query or a fragment.
 */
export function normalizeUrl(raw: string): string {
  return parseUrl(raw, false);
}

/**
 * Strict check of a peer URL sent in a request (CONTRACT §4): like `normalizeUrl`, but the port
 * must be written out. Returns the normal form; throws AgentError `bad-request`.
 */
export function validatePeerUrl(raw: string): string {
  return parseUrl(raw, true);
}

/** True when `name` is a DNS-1123 subdomain of at most 253 characters (as Kubernetes validates it). */
export function isValidMemberName(name: string): boolean {
  return name.length <= 253 && DNS1123_SUBDOMAIN.test(name);
}

/**
 * Substitutes every `{name}` and `{fqdn}` in `template` (`fqdn` defaults to `name`). The result is
 * not checked here; pass it through `validatePeerUrl`.
 */
export function peerUrlFromTemplate(template: string, name: string, fqdn?: string): string {
  return template.replaceAll('{name}', name).replaceAll('{fqdn}', fqdn ?? name);
}

/**
 * The peer URL of the kbagent route (CONTRACT §5): `{scheme}://{fqdn}:2380`, with `https` when
 * the template's scheme is https, else `http`.
 */
export function peerUrlFromFqdn(fqdn: string, template?: string): string {
  const scheme = template !== undefined && /^https:\/\//i.test(template.trim()) ? 'https' : 'http';
  return `${scheme}://${fqdn}:2380`;
}

/** How a request's member reference resolved against the member list. */
export type MatchResult =
  | { kind: 'none' }
  | { kind: 'match'; member: Member }
  | { kind: 'conflict'; message: string; details: Record<string, unknown> };

/** What a request asks to match: a name and peer URLs (raw or normalised), or an id. */
export interface MatchWanted {
  name?: string;
  peerURLs: string[];
  id?: string;
}

/** Canonical hex id: lowercase, no "0x", no leading zeros ("0" for zero). */
function canonicalId(raw: string): string | undefined {
  const m = HEX_ID.exec(raw.trim());
  if (m === null) return undefined;
  // HEX_ID's `0*` has already dropped the leading zeros, keeping one digit for zero.
  return (m[1] as string).toLowerCase();
}

/** A member's URL for comparison; one etcd reports that our rule rejects is compared as written. */
function comparableUrl(raw: string): string {
  try {
    return normalizeUrl(raw);
  } catch {
    return raw;
  }
}

function describeMember(member: Member): string {
  const name = member.name === '' ? ' (unstarted)' : ` (${member.name})`;
  return `${member.id}${name}`;
}

function listUrls(urls: string[]): string {
  return urls.length === 0 ? '(none)' : urls.join(', ');
}

function memberDetail(member: Member): Record<string, unknown> {
  return { id: member.id, name: member.name, peerURLs: member.peerURLs, started: member.started };
}

/**
 * Finds the member a request names (CONTRACT §3). By `id` (hex, case-insensitive, leading zeros
 * ignored): exactly that member, name and URLs ignored. Otherwise a member matches when one of its
 * peer URLs equals a requested one (normalised), or when it is started and its name equals the
 * requested name; with no peer URLs, by name alone. Clashes of identity are a `conflict`.
 * Throws AgentError `bad-request` for an invalid id or requested URL, or when nothing is named.
 */
export function matchMember(members: Member[], wanted: MatchWanted): MatchResult {
  if (wanted.id !== undefined) {
    const id = canonicalId(wanted.id);
    if (id === undefined) {
      throw new AgentError('bad-request', `member id ${JSON.stringify(wanted.id)} is not hex`, {
        details: { id: wanted.id },
      });
    }
    const member = members.find((m) => canonicalId(m.id) === id);
    return member === undefined ? { kind: 'none' } : { kind: 'match', member };
  }

  const name = wanted.name ?? '';
  const urls = [...new Set(wanted.peerURLs.map(normalizeUrl))];
  if (name === '' && urls.length === 0) {
    throw new AgentError('bad-request', 'a member is named by name, peerURLs or id');
  }
  const requested = { name: wanted.name, peerURLs: urls };
  const conflict = (message: string, clashing: Member[]): MatchResult => ({
    kind: 'conflict',
    message,
    details: { requested, members: clashing.map(memberDetail) },
  });
  const sharedUrls = (m: Member): string[] => urls.filter((u) => m.peerURLs.some((p) => comparableUrl(p) === u));

  const byUrl = members.filter((m) => sharedUrls(m).length > 0);
  const byName = name === '' ? [] : members.filter((m) => m.started && m.name === name);

  if (byName.length > 1) {
    return conflict(`name ${name} is used by ${byName.length} members: ${byName.map(describeMember).join(', ')}`, byName);
  }
  if (byUrl.length > 1) {
    const owners = byUrl.map((m) => `${listUrls(sharedUrls(m))} belongs to member ${describeMember(m)}`);
    return conflict(`requested peer URLs belong to different members: ${owners.join('; ')}`, byUrl);
  }
  const named = byName[0];
  const located = byUrl[0];

  if (named !== undefined && located !== undefined && named !== located) {
    return conflict(
      `name ${name} is member ${named.id} but peer URL ${listUrls(sharedUrls(located))} belongs to member ${describeMember(located)}`,
      [named, located],
    );
  }
  if (located !== undefined) {
    if (name !== '' && located.started && located.name !== '' && located.name !== name) {
      return conflict(
        `peer URL ${listUrls(sharedUrls(located))} belongs to member ${located.id} named ${located.name}; requested name ${name}`,
        [located],
      );
    }
    return { kind: 'match', member: located };
  }
  if (named !== undefined) {
    if (urls.length > 0) {
      return conflict(
        `name ${name} is taken by member ${named.id} with peer URLs ${listUrls(named.peerURLs)}; requested ${listUrls(urls)}`,
        [named],
      );
    }
    return { kind: 'match', member: named };
  }
  return { kind: 'none' };
}

/** The AgentError (`conflict`, HTTP 409) for a conflicting match. */
export function toConflictError(result: Extract<MatchResult, { kind: 'conflict' }>): AgentError {
  return new AgentError('conflict', result.message, { details: result.details });
}

/** The `cluster` counts of a membership answer: all members, voters (not learners), learners. */
export function summarizeCluster(clusterId: string, members: Member[]): ClusterSummary {
  const learners = members.filter((m) => m.isLearner).length;
  return { id: clusterId, members: members.length, voters: members.length - learners, learners };
}

/** The phase a member has reached: `unstarted` until it starts, then `learner` or `voter`. */
export function memberPhase(member: Member): Phase {
  if (!member.started) return 'unstarted';
  return member.isLearner ? 'learner' : 'voter';
}
