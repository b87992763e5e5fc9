/**
 * Which gauges one observation leaves on /metrics (health/health-metrics.ts): set from the
 * observation, or absent; never a 0 that the observation did not see.
 */
import type { ClusterHealth, MemberHealth } from '../../agent/health/types';
import { oldestAgeSeconds, recordClusterHealth, recordUnknownHealth } from '../../agent/health/health-metrics';
import { createMetrics } from '../../agent/observability/metrics';

function member(name: string, isLearner = false, reachable = true): MemberHealth {
  return {
    id: name,
    name,
    isLearner,
    started: true,
    reachable,
    isLeader: name === 'etcd-0',
    raftTerm: 2,
    raftIndex: 10,
    raftAppliedIndex: 10,
    dbSizeBytes: reachable ? 2048 : null,
    dbSizeInUseBytes: reachable ? 1024 : null,
    latencyMs: 1,
    errors: [],
  };
}

const NOW = Date.parse('2026-12-01T00:10:00.000Z');

const healthy: ClusterHealth = {
  status: 'healthy',
  quorum: { voters: 3, healthyVoters: 3, required: 2, hasQuorum: true, faultTolerance: 1 },
  leader: { id: 'etcd-0', name: 'etcd-0' },
  members: [member('etcd-0'), member('etcd-1'), member('etcd-2')],
  alarms: [],
  errors: [],
  operations: [],
};
const lost: ClusterHealth = {
  ...healthy,
  status: 'unavailable',
  quorum: { voters: 3, healthyVoters: 1, required: 2, hasQuorum: false, faultTolerance: 0 },
  members: [member('etcd-0'), member('etcd-1', false, false), member('etcd-2', false, false)],
  operations: undefined,
};
const learning: ClusterHealth = {
  ...healthy,
  status: 'degraded',
  members: [...healthy.members, member('etcd-3', true)],
  alarms: [{ memberId: 'etcd-1', name: 'etcd-1', alarm: 'NOSPACE' }],
  operations: [
    {
      id: 'o1',
      action: 'memberJoin',
      member: { name: 'etcd-3', peerURLs: [] },
      agent: 'etcd-0',
      startedAt: '2026-12-01T00:08:00.000Z',
      step: 'added',
    },
  ],
};
const nothingAnswered: ClusterHealth = {
  ...lost,
  quorum: { voters: 0, healthyVoters: 0, required: 1, hasQuorum: false, faultTolerance: 0 },
  members: [],
};

/** The sample lines of /metrics, without HELP and TYPE. */
async function samples(record: (m: ReturnType<typeof createMetrics>) => void): Promise<string[]> {
  const metrics = createMetrics({ defaultMetrics: false });
  record(metrics);
  const text = await metrics.registry.metrics();
  return text
    .split('\n')
    .filter(
      (l) => l.startsWith('etcd_agent_') && !/^etcd_agent_(build_info|http|action|membership|status_rpcs|health_obs|defrag|backup)/.test(l),
    );
}

describe('recordClusterHealth', () => {
  it.each<[string, ClusterHealth, string[]]>([
    [
      'healthy',
      healthy,
      [
        'etcd_agent_cluster_healthy 1',
        'etcd_agent_quorum_healthy_voters 3',
        'etcd_agent_quorum_voters 3',
        'etcd_agent_member_reachable{member="etcd-0"} 1',
        'etcd_agent_member_reachable{member="etcd-1"} 1',
        'etcd_agent_member_reachable{member="etcd-2"} 1',
        'etcd_agent_cluster_status{status="healthy"} 1',
        'etcd_agent_cluster_status{status="degraded"} 0',
        'etcd_agent_cluster_status{status="unavailable"} 0',
        'etcd_agent_cluster_status{status="unknown"} 0',
        'etcd_agent_quorum_fault_tolerance 1',
        'etcd_agent_quorum_has_quorum 1',
        'etcd_agent_cluster_learners 0',
        'etcd_agent_cluster_members 3',
        'etcd_agent_cluster_alarms{alarm="NOSPACE"} 0',
        'etcd_agent_cluster_alarms{alarm="CORRUPT"} 0',
        'etcd_agent_operations_in_flight 0',
        'etcd_agent_operations_oldest_age_seconds 0',
        'etcd_agent_member_db_size_bytes{member="etcd-0"} 2048',
        'etcd_agent_member_db_size_bytes{member="etcd-1"} 2048',
        'etcd_agent_member_db_size_bytes{member="etcd-2"} 2048',
        'etcd_agent_member_db_size_in_use_bytes{member="etcd-0"} 1024',
        'etcd_agent_member_db_size_in_use_bytes{member="etcd-1"} 1024',
        'etcd_agent_member_db_size_in_use_bytes{member="etcd-2"} 1024',
      ],
    ],
    [
      'quorum lost, operations unread',
      lost,
      [
        'etcd_agent_cluster_healthy 0',
        'etcd_agent_quorum_healthy_voters 1',
        'etcd_agent_quorum_voters 3',
        'etcd_agent_member_reachable{member="etcd-0"} 1',
        'etcd_agent_member_reachable{member="etcd-1"} 0',
        'etcd_agent_member_reachable{member="etcd-2"} 0',
        'etcd_agent_cluster_status{status="healthy"} 0',
        'etcd_agent_cluster_status{status="degraded"} 0',
        'etcd_agent_cluster_status{status="unavailable"} 1',
        'etcd_agent_cluster_status{status="unknown"} 0',
        'etcd_agent_quorum_fault_tolerance 0',
        'etcd_agent_quorum_has_quorum 0',
        'etcd_agent_cluster_learners 0',
        'etcd_agent_cluster_members 3',
        'etcd_agent_cluster_alarms{alarm="NOSPACE"} 0',
        'etcd_agent_cluster_alarms{alarm="CORRUPT"} 0',
        // Members that did not answer have no size: absent, not 0.
        'etcd_agent_member_db_size_bytes{member="etcd-0"} 2048',
        'etcd_agent_member_db_size_in_use_bytes{member="etcd-0"} 1024',
      ],
    ],
    [
      'a learner joining, NOSPACE raised',
      learning,
      [
        'etcd_agent_cluster_healthy 0',
        'etcd_agent_quorum_healthy_voters 3',
        'etcd_agent_quorum_voters 3',
        'etcd_agent_member_reachable{member="etcd-0"} 1',
        'etcd_agent_member_reachable{member="etcd-1"} 1',
        'etcd_agent_member_reachable{member="etcd-2"} 1',
        'etcd_agent_member_reachable{member="etcd-3"} 1',
        'etcd_agent_cluster_status{status="healthy"} 0',
        'etcd_agent_cluster_status{status="degraded"} 1',
        'etcd_agent_cluster_status{status="unavailable"} 0',
        'etcd_agent_cluster_status{status="unknown"} 0',
        'etcd_agent_quorum_fault_tolerance 1',
        'etcd_agent_quorum_has_quorum 1',
        'etcd_agent_cluster_learners 1',
        'etcd_agent_cluster_members 4',
        'etcd_agent_cluster_alarms{alarm="NOSPACE"} 1',
        'etcd_agent_cluster_alarms{alarm="CORRUPT"} 0',
        'etcd_agent_operations_in_flight 1',
        'etcd_agent_operations_oldest_age_seconds 120',
        'etcd_agent_member_db_size_bytes{member="etcd-0"} 2048',
        'etcd_agent_member_db_size_bytes{member="etcd-1"} 2048',
        'etcd_agent_member_db_size_bytes{member="etcd-2"} 2048',
        'etcd_agent_member_db_size_bytes{member="etcd-3"} 2048',
        'etcd_agent_member_db_size_in_use_bytes{member="etcd-0"} 1024',
        'etcd_agent_member_db_size_in_use_bytes{member="etcd-1"} 1024',
        'etcd_agent_member_db_size_in_use_bytes{member="etcd-2"} 1024',
        'etcd_agent_member_db_size_in_use_bytes{member="etcd-3"} 1024',
      ],
    ],
    [
      'no member list known',
      nothingAnswered,
      [
        'etcd_agent_cluster_healthy 0',
        'etcd_agent_quorum_healthy_voters 0',
        'etcd_agent_quorum_voters 0',
        'etcd_agent_cluster_status{status="healthy"} 0',
        'etcd_agent_cluster_status{status="degraded"} 0',
        'etcd_agent_cluster_status{status="unavailable"} 1',
        'etcd_agent_cluster_status{status="unknown"} 0',
        'etcd_agent_quorum_fault_tolerance 0',
        'etcd_agent_quorum_has_quorum 0',
        'etcd_agent_cluster_alarms{alarm="NOSPACE"} 0',
        'etcd_agent_cluster_alarms{alarm="CORRUPT"} 0',
      ],
    ],
  ])('when the observation is %s, then /metrics shows exactly these cluster samples', async (_name, health, expected) => {
    expect(await samples((m) => recordClusterHealth(m, health, NOW))).toEqual(expected);
  });

  it('when a healthy observation is followed by an unknown one, then only the status says so and every quorum gauge is gone', async () => {
    const lines = await samples((m) => {
      recordClusterHealth(m, learning, NOW);
      recordUnknownHealth(m);
    });
    expect(lines).toEqual([
      'etcd_agent_cluster_healthy 0',
      'etcd_agent_cluster_status{status="healthy"} 0',
      'etcd_agent_cluster_status{status="degraded"} 0',
      'etcd_agent_cluster_status{status="unavailable"} 0',
      'etcd_agent_cluster_status{status="unknown"} 1',
    ]);
  });
});

describe('oldestAgeSeconds', () => {
  it.each<[string, number, string[]]>([
    ['none', 0, []],
    ['one a minute ago', 60, ['2026-12-01T00:09:00.000Z']],
    ['two, the oldest 5 min ago', 300, ['2026-12-01T00:09:30.000Z', '2026-12-01T00:05:00.000Z']],
    ['an unparsable one and one 0.5 s ago', 0.5, ['soon', '2026-12-01T00:09:59.500Z']],
    ['one in the future (clock skew)', 0, ['2026-12-01T00:11:00.000Z']],
  ])('when the records are %s, then the age is %p s', (_name, age, startedAt) => {
    expect(oldestAgeSeconds(startedAt, NOW)).toBe(age);
  });
});
