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
  if (named(name)) process.kill(process.pid, 'SIGKILL');
}

/**
 * Kills this process with SIGKILL `afterMs` from now when ETCD_AGENT_CRASH_POINTS names `name`:
 * for a death while a request just sent is in flight (its caller goes on awaiting the answer). The
 * timer runs in the agent's own loop, idle while it awaits, so the kill lands on time, where a
 * test's kill on reading a log line comes only as soon as the test's own process gets to run.
 */
export function crashPointAfter(name: string, afterMs: number): void {
  if (named(name)) setTimeout(() => process.kill(process.pid, 'SIGKILL'), afterMs).unref();
}

/**
 * Once `ready()` answers true (or `child` has exited), kills `child` and then this process with
 * SIGKILL, when ETCD_AGENT_CRASH_POINTS names `name`: a death in the middle of a tool's run, the two
 * dying together as the processes of a killed container do.
 */
export function crashPointWithChild(
  name: string,
  child: { kill(signal: NodeJS.Signals): boolean; exitCode: number | null },
  ready: () => boolean,
): void {
  if (!named(name)) return;
  setInterval(() => {
    if (!ready() && child.exitCode === null) return;
    child.kill('SIGKILL');
    process.kill(process.pid, 'SIGKILL');
  }, 2);
}

function named(name: string): boolean {
  // Read once, on first use, so that importing this module reads nothing.
  names ??= new Set(
    (process.env.ETCD_AGENT_CRASH_POINTS ?? '')
      .split(',')
      .map((n) => n.trim())
      .filter(Boolean),
  );
  return names.has(name);
}
