import { parseCron } from '../../agent/lib/cron';
import { DefragSchedule, skipReason, type SkipReason } from '../../agent/maintenance/schedule';
import type { MaintenanceService } from '../../agent/maintenance/service';
import { createLogger } from '../../agent/observability/logger';
import { createMetrics } from '../../agent/observability/metrics';
import { AgentError } from '../../agent/proto/errors';
import type { DefragmentResult } from '../../agent/proto/maintenance';
import { captureLogs } from '../helpers/log-capture';

function result(outcome: DefragmentResult['outcome'], extra: Partial<DefragmentResult> = {}): DefragmentResult {
  return {
    action: 'defragment',
    outcome,
    complete: outcome !== 'in-progress',
    run: {
      id: 'r1',
      agent: 'etcd-1',
      startedAt: '2026-12-01T03:00:00.000Z',
      mode: 'lock',
      step: 'defragmenting etcd-2 (1 of the members to do)',
    },
    compaction: null,
    members: [],
    skipped: [],
    leaderTransferred: false,
    alarm: { noSpace: false, disarmed: false },
    durationMs: 5,
    ...extra,
  };
}

describe('a scheduled run that does not defragment says why', () => {
  it.each<[string, unknown, SkipReason | undefined]>([
    ['it defragmented', result('defragmented'), undefined],
    ['nothing is over the thresholds', result('nothing-to-do'), 'nothing-to-do'],
    ["another agent's run holds the lock", result('in-progress'), 'running-elsewhere'],
    ['a voter is silent', new AgentError('unsafe', 'the cluster is not healthy', { details: { reason: 'unhealthy' } }), 'unhealthy'],
    ['a one-member cluster', new AgentError('unsafe', 'only member', { details: { reason: 'single-member' } }), 'unsafe'],
    ['a membership change holds the lock', new AgentError('busy', 'another membership change holds the cluster lock'), 'busy'],
    [
      'NOSPACE and another agent is the runner',
      new AgentError('busy', 'NOSPACE', { details: { reason: 'nospace-runner', runner: 'etcd-0' } }),
      'not-nospace-runner',
    ],
    ['etcd is unreachable', new AgentError('unavailable', 'etcd is unreachable'), 'failed'],
    ['a bug', new TypeError('x is not a function'), 'failed'],
  ])('when %s, then the reason is %s', (_what, outcome, reason) => {
    expect(skipReason(outcome)).toBe(reason);
  });

  it.each<[string, () => Promise<DefragmentResult>, string | undefined, RegExp]>([
    [
      'it defragmented',
      async () =>
        result('defragmented', {
          members: [
            {
              id: 'a',
              name: 'etcd-2',
              before: { dbSizeBytes: 2, dbSizeInUseBytes: 1 },
              after: { dbSizeBytes: 1, dbSizeInUseBytes: 1 },
              durationMs: 3,
              wasLeader: false,
            },
          ],
        }),
      undefined,
      /scheduled defragmentation done/,
    ],
    [
      'nothing was over the thresholds',
      async () => result('nothing-to-do', { skipped: [{ id: 'a', name: 'etcd-0', reason: 'fragmentation 3 % is below 45 %' }] }),
      'nothing-to-do',
      /"why":"no member is over the thresholds \(etcd-0: fragmentation 3 % is below 45 %\)"/,
    ],
    [
      'another agent ran it',
      async () => result('in-progress'),
      'running-elsewhere',
      /"why":"agent etcd-1 is running one \(defragmenting etcd-2/,
    ],
    [
      'the cluster was unhealthy',
      async () =>
        Promise.reject(new AgentError('unsafe', 'the cluster is not healthy: etcd-2 did not answer', { details: { reason: 'unhealthy' } })),
      'unhealthy',
      /"why":"the cluster is not healthy: etcd-2 did not answer"/,
    ],
  ])('when a scheduled run finds that %s, then one log line and the skip metric say so', async (_what, answer, reason, line) => {
    const metrics = createMetrics({ defaultMetrics: false });
    const { stream, text } = captureLogs();
    const logger = createLogger({ level: 'info', stream });
    const service = { defragment: jest.fn(answer) } as unknown as MaintenanceService;
    const schedule = new DefragSchedule({ schedule: parseCron('0 3 * * *'), service, logger, metrics });

    await schedule.fire(new Date('2026-12-01T03:00:00.000Z'));

    expect(service.defragment).toHaveBeenCalledWith({}, { requestId: 'schedule-2026-12-01T03:00:00.000Z' }, true);
    expect(text()).toMatch(line);
    const skips = (await metrics.defragScheduleSkips.get()).values.map((v) => `${String(v.labels.reason)} ${v.value}`);
    expect(skips).toEqual(reason === undefined ? [] : [`${reason} 1`]);
  });
});
