/**
 * A survivor's rejoin after a recovery removed its member: when this pod's etcd does not answer or
 * knows no leader, and the cluster that answers keeps a recovery record naming the member its data
 * directory holds (rejoin-rule.ts), hold etcd, let prepare's passes move the data aside and join a
 * learner, and lift the hold. A hold in force (this agent's, or one its predecessor left) is taken up
 * where it is.
 *
 * Invariant: etcd is held for a rejoin only on a record that names its member as removed, and the
 * hold is lifted only once prepare's passes have written its start flags.
 */
import { RECOVERY_RECORD_ATTEMPT_MS } from '../config/timings';
import { readRecoveryRecord } from '../etcd/recovery-record';
import { readDataDir } from '../etcd-data/data-dir';
import { crashPoint } from '../lib/crash-point';
import { Deadline } from '../lib/deadline';
import { preparePasses } from '../prepare/run';
import { mustRejoin } from './rejoin-rule';
import type { ActContext } from './steps';

/** What one look gives prepare's passes (data moved aside, learner joined); the hold stays, and the next look takes it up. */
const REJOIN_PREPARE_MS = 20_000;

/** One look of the rejoin watch (see the module comment). */
export async function rejoinIfRemoved(ctx: ActContext): Promise<void> {
  const { control, prepare, cluster, config, logger, membership } = ctx;
  if (control.heldBy() === undefined) {
    const dir = readDataDir(prepare.dataDir);
    if (dir.kind !== 'member') return;
    const status = await cluster.memberStatus(config.localEndpoint, config.statusTimeoutMs).catch(() => undefined);
    if (status !== undefined && status.leaderId !== '0') return;
    const record = await readRecoveryRecord(cluster, config.keyPrefix, Deadline.in(RECOVERY_RECORD_ATTEMPT_MS)).catch(() => undefined);
    if (record === undefined || !mustRejoin({ dataDir: dir, leaderId: status?.leaderId, record })) return;
    logger.warn('this member was removed by a recovery: holding etcd to move its data aside and rejoin as a learner', {
      member: dir.memberId,
      recovery: record.id,
    });
    control.hold(`rejoin-${record.id}`);
    crashPoint('rejoin-hold-asked');
  }
  const nonce = control.heldBy() as string;
  if (!control.isHeld(nonce)) return;
  const outcome = await preparePasses(
    prepare,
    { cluster, membership, logger },
    { until: Date.now() + REJOIN_PREPARE_MS, sidecar: true, control },
  );
  if (!outcome.prepared) return;
  control.release();
  logger.info('etcd prepared again and released', { nonce, state: outcome.step.state, reason: outcome.step.reason });
  crashPoint('rejoin-released');
}
