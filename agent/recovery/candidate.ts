/**
 * Which surviving member a recovery starts from: the most advanced, by a pure rule.
 *
 * The rule is the highest committed index; a tie goes to the higher raft term, then the higher
 * applied index, then the name (so the answer never depends on the order members are listed in).
 * Committed entries never differ between members (raft's log matching: an entry committed at an
 * index is the same entry in every log that has that index), so the member that knows the highest
 * commit holds every committed entry any other survivor holds, and more. The commit index is also
 * exactly what `--force-new-cluster` keeps: it drops every entry above it. The term comes second
 * only: it says how many elections a member saw, not how much of the log it holds (without pre-vote,
 * etcd 3.4's default, a cut-off member raises its term on every failed election).
 */

/** One survivor's log, as the rule needs it. */
export interface Survivor {
  name: string;
  committedIndex: number;
  raftTerm: number;
  appliedIndex: number | null;
}

/** The most advanced of `survivors` (see the module comment), or undefined when there are none. */
export function mostAdvanced<T extends Survivor>(survivors: readonly T[]): T | undefined {
  return [...survivors].sort(compareAdvanced)[0];
}

/** Orders survivors most advanced first. */
export function compareAdvanced(a: Survivor, b: Survivor): number {
  return (
    b.committedIndex - a.committedIndex ||
    b.raftTerm - a.raftTerm ||
    (b.appliedIndex ?? -1) - (a.appliedIndex ?? -1) ||
    (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
  );
}
