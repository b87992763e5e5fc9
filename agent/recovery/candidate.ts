/**
 * Which surviving member a recovery starts from: the most advanced, by a pure rule.
 *
 * What a recovery from a member keeps is exactly its committed log: `--force-new-cluster` discards
 * every entry above the member's commit index. Committed entries never differ between members (raft's
 * log matching: an entry committed at an index is the same entry in every log that has that index),
 * so the member that knows the highest commit index holds every committed entry any other survivor
 * holds, and members at the same commit index keep exactly the same entries.
 *
 * Hence: a member may be recovered from when no other survivor knows a higher commit index
 * (`dropsNothing`); the plan names one of them by the order highest commit index, then higher raft
 * term, then name (`mostAdvanced`), so the answer never depends on the order members are listed in.
 * The term only breaks ties: it says how many elections a member saw, not how much of the log it
 * holds (without pre-vote, etcd 3.4's default, a cut-off member raises its term on every failed
 * election). The applied index is not used: a member read from its data directory has none, and a
 * restart applies the committed entries anyway.
 */

/** One survivor's log, as the rule needs it. */
export interface Survivor {
  name: string;
  committedIndex: number;
  raftTerm: number;
}

/** The most advanced of `survivors` (see the module comment), or undefined when there are none. */
export function mostAdvanced<T extends Survivor>(survivors: readonly T[]): T | undefined {
  return [...survivors].sort(compareAdvanced)[0];
}

/** Orders survivors most advanced first. */
export function compareAdvanced(a: Survivor, b: Survivor): number {
  return b.committedIndex - a.committedIndex || b.raftTerm - a.raftTerm || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
}

/** The survivors that know more committed entries than `from`, most advanced first: what a recovery from `from` drops. */
export function aheadOf<T extends Survivor>(from: Survivor, survivors: readonly T[]): T[] {
  return survivors.filter((s) => s.name !== from.name && s.committedIndex > from.committedIndex).sort(compareAdvanced);
}
