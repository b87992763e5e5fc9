/**
 * What the agent does differently by etcd server version, as pure rules, and the version each
 * endpoint last reported (Status answers carry it, so knowing it costs no call of its own).
 *
 * Invariant: an endpoint whose version is not known is treated as the oldest supported (3.4): every
 * rule here is then still correct, only sometimes one request slower.
 */
import { canonicalUrl } from '../proto/urls';

/** `major.minor.patch` of an etcd version string such as `3.6.16` (anything after is ignored); undefined when it is not one. */
export function parseVersion(version: string | undefined): [number, number, number] | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(version ?? '');
  return m === null ? undefined : [Number(m[1]), Number(m[2]), Number(m[3])];
}

/** True when `version` is at least `major.minor.patch`; false when it is unknown or unreadable. */
export function atLeast(version: string | undefined, major: number, minor: number, patch = 0): boolean {
  const v = parseVersion(version);
  if (v === undefined) return false;
  const want = [major, minor, patch];
  for (let i = 0; i < 3; i++) if (v[i] !== want[i]) return v[i] > want[i];
  return true;
}

/**
 * True when MemberList asked with `linearizable: true` is linearizable on a member of `version`:
 * etcd 3.5 added the field (etcd-io/etcd#11639); 3.4 does not know it and answers from the member's
 * own applied state, so there a linearizable read on the same member must come first.
 */
export function hasLinearizableMemberList(version: string | undefined): boolean {
  return atLeast(version, 3, 5);
}

/** How long an endpoint whose Status call failed is not asked again just for its version. */
const RETRY_ASKING_MS = 10_000;

/** The version each endpoint reported in its last Status answer. */
export class ServerVersions {
  private readonly byUrl = new Map<string, string>();
  private readonly failedAt = new Map<string, number>();

  /** `url` answered a Status call saying it runs `version`. */
  learn(url: string, version: string | undefined): void {
    if (version !== undefined && version !== '') this.byUrl.set(canonicalUrl(url), version);
  }

  /** The version `url` last reported, if it ever answered a Status call. */
  of(url: string): string | undefined {
    return this.byUrl.get(canonicalUrl(url));
  }

  /** Asking `url` for its version failed: do not ask it again only for that for a while. */
  askFailed(url: string, now = Date.now()): void {
    this.failedAt.set(canonicalUrl(url), now);
  }

  /** True unless asking `url` for its version failed in the last 10 s. */
  worthAsking(url: string, now = Date.now()): boolean {
    return now - (this.failedAt.get(canonicalUrl(url)) ?? -Infinity) >= RETRY_ASKING_MS;
  }
}
