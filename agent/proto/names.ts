/**
 * Names of members (docs/api.md §3): the one home of the rule. A member is named after its pod, so a
 * name is what Kubernetes accepts as a pod name: a DNS-1123 subdomain of at most 253 characters.
 * Pure: no I/O.
 */

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** True for a Kubernetes DNS-1123 subdomain (1 to 253 characters: lowercase alphanumerics, "-", "."). */
export function isDnsSubdomain(value: string): boolean {
  return value.length <= 253 && DNS1123_SUBDOMAIN.test(value);
}

/** True when `name` may name a member: a DNS-1123 subdomain of at most 253 characters (a pod name). */
export function isValidMemberName(name: string): boolean {
  return isDnsSubdomain(name);
}
