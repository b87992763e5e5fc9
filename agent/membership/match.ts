/**
 * Member matching (docs/api.md §3): which listed member a request names, and how a
 * member is named in messages. Pure: no I/O, no etcd. The URL normal forms and
 * the name rule it relies on live in proto/urls.ts and proto/names.ts.
 */
import { AgentError } from '../proto/errors';
import type { ClusterSummary, Member, Phase } from '../proto/types';
import { normalizeUrl, peerUrlFromTemplate, validatePeerUrl } from '../proto/urls';

const HEX_ID = /^(?:0x)?0*([0-9a-fA-F]{1,16})$/;

/** How a request's member reference resolved against the member list. */
export type MatchResult =
  { kind: 'none' } | { kind: 'match'; member: Member } | { kind: 'conflict'; message: string; details: Record<string, unknown> };

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

/** How a member is named in every message: `etcd-1 (91bc3c398fb3c146)`; an unstarted one by its peer URLs. */
export function describeMember(member: Member): string {
  const label = member.name !== '' ? member.name : `unstarted ${listUrls(member.peerURLs)}`;
  return `${label} (${member.id})`;
}

function listUrls(urls: string[]): string {
  return urls.length === 0 ? '(none)' : urls.join(', ');
}

function memberDetail(member: Member): Record<string, unknown> {
  return { id: member.id, name: member.name, peerURLs: member.peerURLs, started: member.started };
}

/**
 * Finds the member a request names (docs/api.md §3). By `id` (hex, case-insensitive, leading zeros
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

/**
 * The member a request names (docs/api.md §3): by `id` alone when given; else by name and peer URLs,
 * its own or the one the peer URL template makes from the name (none without a template: then
 * the member is matched by name alone).
 */
export function wantedMember(config: { peerUrlTemplate?: string }, req: { id?: string; name?: string; peerURLs?: string[] }): MatchWanted {
  if (req.id !== undefined) return { id: req.id, peerURLs: [] };
  return { name: req.name, peerURLs: requestedPeerURLs(config, req.name ?? '', req.peerURLs) };
}

/** The peer URLs a request for `name` means: its own, else the template's, else none. */
export function requestedPeerURLs(config: { peerUrlTemplate?: string }, name: string, peerURLs?: string[]): string[] {
  if (peerURLs !== undefined) return peerURLs;
  if (config.peerUrlTemplate === undefined) return [];
  const url = peerUrlFromTemplate(config.peerUrlTemplate, name);
  validatePeerUrl(url);
  return [url];
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
