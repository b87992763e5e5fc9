/**
 * Where backups go, written as one URL (the setting `ETCD_AGENT_BACKUP_STORE` and prepare's restore
 * source take the same form):
 *
 *   s3://bucket[/prefix][?endpoint=https://host:port&region=us-east-1&path-style=true]
 *   file:///var/lib/etcd-backups   (or the bare absolute path)
 *
 * S3 credentials never appear here: they come from the AWS SDK's standard chain (environment, shared
 * files, web identity). `parseLocation` is pure and answers a bad-request AgentError naming `what`.
 */
import * as path from 'node:path';
import { AgentError } from './errors';

/** An S3-compatible bucket (AWS, MinIO, Ceph, versitygw) and the prefix under it. */
export interface S3Location {
  kind: 's3';
  bucket: string;
  /** Ends in "/" unless empty. */
  prefix: string;
  /** An endpoint other than AWS's. */
  endpoint?: string;
  region?: string;
  /** Path-style addressing (`host/bucket/key`), which most stores other than AWS need. */
  pathStyle: boolean;
}

/** A local directory (a PVC, a mounted volume). */
export interface DirLocation {
  kind: 'dir';
  path: string;
}

/** A parsed store location. */
export type StoreLocation = S3Location | DirLocation;

const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const QUERY_KEYS = new Set(['endpoint', 'region', 'path-style']);
const REGION = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * `text` with the user info of every URL in it, plain or %-escaped (an endpoint inside the query),
 * shown as `***`: what a refusal may quote of a value that holds credentials.
 */
export function hideUserInfo(text: string): string {
  return text.replace(/(\/\/|%2F%2F)[^/?#&@\s]*?(@|%40)/gi, '$1***$2');
}

/** Parses a store URL (see the module comment). A refusal never quotes the credentials it refuses. */
export function parseLocation(text: string, what = 'backup store'): StoreLocation {
  const value = text.trim();
  const bad = (why: string): AgentError => new AgentError('bad-request', `${what}: "${hideUserInfo(value)}" ${why}`);
  const decoded = (part: string): string => {
    try {
      return decodeURIComponent(part);
    } catch {
      throw bad('has a malformed %-escape in its path');
    }
  };
  if (value.startsWith('/')) return { kind: 'dir', path: path.resolve(value) };
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw bad('is neither s3://bucket/prefix nor file:///path nor an absolute path');
  }
  if (url.protocol === 'file:') {
    if (url.host !== '' || url.search !== '') throw bad('must be file:///absolute/path, without a host or a query');
    return { kind: 'dir', path: path.resolve(decoded(url.pathname)) };
  }
  if (url.protocol !== 's3:') throw bad('must start with s3:// or file://');
  if (url.username !== '' || url.password !== '')
    throw bad('must not hold credentials: they come from the AWS SDK chain (AWS_ACCESS_KEY_ID, …)');
  const bucket = url.hostname;
  if (!BUCKET.test(bucket)) throw bad(`names the bucket "${bucket}", which is not a valid bucket name`);
  // A port here would be dropped silently: the store's address goes in ?endpoint=.
  if (url.port !== '') throw bad("names a port on the bucket: give the store's address as ?endpoint=http(s)://host:port");
  for (const key of url.searchParams.keys())
    if (!QUERY_KEYS.has(key)) throw bad(`has the unknown option "${key}" (endpoint, region, path-style)`);
  const endpoint = url.searchParams.get('endpoint') ?? undefined;
  if (endpoint !== undefined) checkEndpoint(endpoint, bad);
  const region = url.searchParams.get('region');
  // An empty or mistyped region would fail only at the first call, in the SDK's words.
  if (region !== null && !REGION.test(region)) throw bad('has a region that is not one (letters, digits, - and _, as us-east-1)');
  const pathStyle = url.searchParams.get('path-style');
  if (pathStyle !== null && pathStyle !== 'true' && pathStyle !== 'false') throw bad('has path-style that is neither true nor false');
  const trimmed = decoded(url.pathname).replace(/^\/+|\/+$/g, '');
  return {
    kind: 's3',
    bucket,
    prefix: trimmed === '' ? '' : `${trimmed}/`,
    ...(endpoint === undefined ? {} : { endpoint: endpoint.replace(/\/$/, '') }),
    ...(region === null ? {} : { region }),
    pathStyle: pathStyle === null ? endpoint !== undefined : pathStyle === 'true',
  };
}

/**
 * Refuses an endpoint that is not `http(s)://host[:port]`: the store's address alone. Credentials in
 * it would be printed wherever the location is (logs, the `store` label, prepare's answer).
 */
function checkEndpoint(endpoint: string, bad: (why: string) => AgentError): void {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw bad('has an endpoint that is not http(s)://host[:port]');
  }
  if (url.username !== '' || url.password !== '')
    throw bad('has an endpoint that holds credentials: they come from the AWS SDK chain (AWS_ACCESS_KEY_ID, …)');
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '' || !/^https?:\/\/[^/?#]+\/?$/.test(endpoint))
    throw bad('has an endpoint that is not http(s)://host[:port] (no path, query or fragment)');
}

/** The location as logs show it. */
export function describeLocation(location: StoreLocation): string {
  if (location.kind === 'dir') return `directory ${location.path}`;
  return `s3://${location.bucket}/${location.prefix}${location.endpoint === undefined ? '' : ` at ${location.endpoint}`}`;
}
