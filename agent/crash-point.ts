/**
 * Crash points: named steps at which the agent (or prepare) kills itself with SIGKILL when the
 * environment variable ETCD_AGENT_CRASH_POINTS names them (comma-separated). Tests use them to kill
 * the real process exactly at a step of a recovery or a rejoin, where a kill sent on a log line would
 * land a few milliseconds later, past the next file write; a rerun must converge from there (as
 * etcd's own robustness tests do with gofail failpoints). Not configuration: never set it in a pod.
 *
 * Invariant: with the variable unset (always, outside tests) `crashPoint` does nothing.
 */

let names: ReadonlySet<string> | undefined;

/** Kills this process with SIGKILL when ETCD_AGENT_CRASH_POINTS names `name`; otherwise nothing. */
export function crashPoint(name: string): void {
  // Read once, on first use, so that importing this module reads nothing.
  names ??= new Set((process.env.ETCD_AGENT_CRASH_POINTS ?? '').split(',').map((n) => n.trim()).filter(Boolean));
  if (names.has(name)) process.kill(process.pid, 'SIGKILL');
}
