/**
 * The recovery order: the record of a recovery ordered from this pod's member, kept in
 * `recovery-order.json` beside prepare's flags file from the call that orders it until it is done.
 * A restarted agent reads it to finish (or call off) what its predecessor began, and a repeated call
 * reads it to answer what was done. Its shape is `RecoveryOrder` (proto/recovery.ts), as
 * GET /v1/recovery/local shows it.
 *
 * Its step moves ordered → held → started → done (steps.ts takes it each way); the one way back is a
 * start whose one-shot flag never took effect, which is ordered again through a new hold.
 *
 * Invariant: the file is replaced whole (written beside it, then renamed), so a crash leaves the
 * step before or the step after, never a torn file; a file that does not parse is no order.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { writeFileAtomic } from '../etcd-data/data-dir';
import type { RecoveryOrder, RecoveryRecord } from '../proto/recovery';
import type { Member } from '../proto/types';
import type { RecoveryDecision } from './decision';

/** A step of the order. */
export type OrderStep = RecoveryOrder['step'];

/** The order file of the start directory that holds prepare's flags file. */
export class OrderFile {
  readonly file: string;

  constructor(flagsFile: string) {
    this.file = path.join(path.dirname(flagsFile), 'recovery-order.json');
  }

  /** The order kept, or undefined when there is none (or it does not parse). */
  read(): RecoveryOrder | undefined {
    try {
      return JSON.parse(fs.readFileSync(this.file, 'utf8')) as RecoveryOrder;
    } catch {
      return undefined;
    }
  }

  /** Keeps `order`, replacing the one kept. */
  write(order: RecoveryOrder): void {
    writeFileAtomic(this.file, `${JSON.stringify(order)}\n`);
  }

  /** Keeps `order` moved to `step`, and returns it so. */
  moveTo(order: RecoveryOrder, step: OrderStep): RecoveryOrder {
    // The spread keeps every field, and `step` in its place: the file differs in the step alone.
    const moved = { ...order, step };
    this.write(moved);
    return moved;
  }

  /** Drops the order (a recovery called off). */
  remove(): void {
    fs.rmSync(this.file, { force: true });
  }
}

/** A new order at its first step, from the gates' `recover` decision, the loss start and the member list it was decided on. */
export function newOrder(
  decision: Extract<RecoveryDecision, { kind: 'recover' }>,
  lostSinceMs: number | undefined,
  members: Member[],
): RecoveryOrder {
  return {
    id: randomUUID(),
    from: decision.from.name,
    fromId: decision.from.id,
    clusterId: decision.clusterId,
    force: decision.forced,
    orderedAt: new Date().toISOString(),
    quorumLostSince: lostSinceMs === undefined ? null : new Date(lostSinceMs).toISOString(),
    committedIndex: decision.from.committedIndex,
    raftTerm: decision.from.raftTerm,
    removed: decision.removed,
    members,
    step: 'ordered',
  };
}

/** The record the recovered cluster keeps of `order`, once it takes writes (at `writableAt`, an ISO time). */
export function recordOf(order: RecoveryOrder, writableAt: string): RecoveryRecord {
  return {
    id: order.id,
    clusterId: order.clusterId,
    from: { name: order.from, id: order.fromId, committedIndex: order.committedIndex, raftTerm: order.raftTerm },
    removed: order.removed,
    quorumLostSince: order.quorumLostSince,
    orderedAt: order.orderedAt,
    writableAt,
    force: order.force,
  };
}
