/**
 * URL normal forms (docs/api.md §3), the one home of every rule that compares or checks a URL. Pure: no
 * I/O. Three forms, on purpose:
 * - `validatePeerUrl` is the strict rule for URLs a caller sends (docs/api.md §4, last paragraph):
 *   http or https, a host, an explicit port, nothing else.
 * - `normalizeUrl` is the lenient form used to compare URLs: it also accepts a missing port
 *   (the scheme's default), since etcd reports URLs as its members were configured.
 *   Both return the same normal form: `scheme://host:port`, scheme and host lowercased,
 *   IPv6 hosts in brackets in canonical (compressed) form, no trailing slash.
 * - `canonicalUrl` never throws: it is how health compares what etcd reports with the configured
 *   endpoints, where an odd URL must still compare (with itself) rather than fail an observation.
 */
import { AgentError } from './errors';

const DEFAULT_PORTS: Readonly<Record<string, number>> = { http: 80, https: 443 };

// scheme "://" authority rest; the authority ends at the first "/", "?", "#" or "\"
// (WHATWG parsers treat "\" as "/" in http URLs, so it may not hide inside a host).
const URL_SHAPE = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#\\]*)(.*)$/s;
// A DNS name or an IPv4 address; underscores appear in some real host names.
const REG_NAME = /^[A-Za-z0-9._-]+$/;
const IPV6_LITERAL = /^\[([0-9A-Fa-f:.]+)\]$/;
const PORT = /^[0-9]{1,5}$/;

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
 * Strict check of a peer URL sent in a request (docs/api.md §4): like `normalizeUrl`, but the port
 * must be written out. Returns the normal form; throws AgentError `bad-request`.
 */
export function validatePeerUrl(raw: string): string {
  return parseUrl(raw, true);
}

/**
 * Substitutes every `{name}` and `{fqdn}` in `template` (`fqdn` defaults to `name`). The result is
 * not checked here; pass it through `validatePeerUrl`.
 */
export function peerUrlFromTemplate(template: string, name: string, fqdn?: string): string {
  return template.replaceAll('{name}', name).replaceAll('{fqdn}', fqdn ?? name);
}

/**
 * The peer URL of the kbagent route (docs/api.md §5): `{scheme}://{fqdn}:2380`, with `https` when
 * the template's scheme is https, else `http`.
 */
export function peerUrlFromFqdn(fqdn: string, template?: string): string {
  const scheme = template !== undefined && /^https:\/\//i.test(template.trim()) ? 'https' : 'http';
  return `${scheme}://${fqdn}:2380`;
}

/** Scheme and host lowercased, explicit port, no trailing slash; what etcd reports compared loosely. */
export function canonicalUrl(raw: string): string {
  try {
    const url = new URL(raw);
    const port = url.port !== '' ? url.port : url.protocol === 'https:' ? '443' : '80';
    return `${url.protocol}//${url.hostname.toLowerCase()}:${port}`;
  } catch {
    return raw.trim().toLowerCase().replace(/\/+$/, '');
  }
}

/**
 * An initial cluster (`name=url,…`, etcd's `--initial-cluster`) in one spelling, its entries sorted
 * and its URLs normalised (as written when one does not parse): two lists that differ only in order
 * or in a URL's spelling compare equal.
 */
export function comparableInitialCluster(value: string): string {
  const comparable = (url: string): string => {
    try {
      return normalizeUrl(url.trim());
    } catch {
      return url.trim().toLowerCase();
    }
  };
  return value
    .split(',')
    .map((entry) => {
      const eq = entry.indexOf('=');
      return `${entry.slice(0, eq).trim()}=${comparable(entry.slice(eq + 1))}`;
    })
    .sort()
    .join(',');
}
