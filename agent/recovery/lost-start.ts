/**
 * Whether the start with `--force-new-cluster` was lost: the start script consumed the one-shot file,
 * but etcd runs from a plain start (the script's state does not say `once`) and still lists other
 * members, for longer than replaying its log could take. Then the flag never took effect (etcd's
 * container stopped between the rename and etcd's start), and the order is given again.
 *
 * Invariant: a start counts as lost only on an unbroken stretch of such looks; a look that finds the
 * start pending, marked `once`, or the list unreadable or of one member starts the stretch again.
 */
import type { EtcdStartControl } from '../prepare/etcd-control';
import type { Member } from '../proto/types';

/** How long etcd may run from a plain start, listing other members, before the start counts as lost: longer than a log replay. */
const LOST_START_MS = 10_000;
/** Deadline of a read of this member's own peer member list: a local listener; a failed read only starts the stretch again. */
const PEER_LIST_MS = 1000;

/** Watches, look by look, for a lost one-shot start (see the module comment). */
export class LostStartWatch {
  private since?: number;

  /** One look: true once the start has been seen lost for LOST_START_MS; `members` reads the member list within a timeout. */
  async sees(control: EtcdStartControl, members: (timeoutMs: number) => Promise<Member[]>): Promise<boolean> {
    const state = control.state();
    const listed =
      state.kind === 'running' && !state.once && !control.onceState().pending
        ? await members(PEER_LIST_MS).catch(() => undefined)
        : undefined;
    if (listed === undefined || listed.length <= 1) {
      this.since = undefined;
      return false;
    }
    this.since ??= Date.now();
    return Date.now() - this.since >= LOST_START_MS;
  }
}
