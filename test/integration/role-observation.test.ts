/**
 * The role routes (kbagent's roleProbe, GET /v1/role) and /v1/health/local answer from the shared
 * health observation: while it is fresh they make no etcd call of their own, however
 * often a probe asks. Counted on the real agent against a real 3-member etcd: the Status calls it
 * sends (etcd_agent_status_rpcs_total) and every call through its cluster client.
 */
import type { RunningAgent } from '../../agent/agent';
import { AutoPromoter } from '../../agent/membership/auto-promote';
import { withCluster } from '../helpers/etcd-cluster';
import { get, leaderOf, post, startMemberAgent } from '../helpers/membership';

/** Probes per route in the count below. */
const PROBES = 20;

/** The cluster client's methods that reach etcd. */
const CLIENT_CALLS = ['listMembers', 'localMemberList', 'memberListAt', 'memberStatus', 'alarms', 'read', 'write', 'grantLease'] as const;

/** The etcd calls the agent makes while `fn` runs: Status RPCs (its metric) and its cluster client's calls by method. */
async function etcdCalls(agent: RunningAgent, fn: () => Promise<void>): Promise<{ statusRpcs: number; client: Record<string, number> }> {
  // Spies that call through: they count, etcd answers.
  const spies = CLIENT_CALLS.map((m) => [m, jest.spyOn(agent.cluster, m)] as const);
  const before = await statusRpcs(agent);
  try {
    await fn();
    return {
      statusRpcs: (await statusRpcs(agent)) - before,
      client: Object.fromEntries(spies.map(([m, spy]) => [m, spy.mock.calls.length])),
    };
  } finally {
    spies.forEach(([, spy]) => spy.mockRestore());
  }
}

async function statusRpcs(agent: RunningAgent): Promise<number> {
  return (await agent.metrics.statusRpcs.get()).values.reduce((sum, v) => sum + v.value, 0);
}

describe('the role from the shared observation', () => {
  const cluster = withCluster(3);
  let agent: RunningAgent;
  let own: string;

  beforeAll(async () => {
    const leader = await leaderOf(cluster());
    own = leader.name;
    // The auto-promotion loop asks the local etcd for its Status once a second: kept out of the
    // count, which is the routes' alone.
    jest.spyOn(AutoPromoter.prototype, 'tick').mockResolvedValue(undefined);
    // Fresh for 10 s: the count below runs well inside one observation's age.
    agent = await startMemberAgent(cluster(), own, { ETCD_AGENT_HEALTH_MAX_AGE_MS: '10000', ETCD_AGENT_STATUS_TIMEOUT_MS: '1000' });
  });

  afterAll(async () => {
    await agent?.stop(2000);
  });

  it.each<[string, () => Promise<string>]>([
    ['GET /v1/role', async () => (await get(agent, '/v1/role')).text],
    [
      "kbagent's roleProbe",
      async () => Buffer.from((await post(agent, '/v1.0/action', { action: 'roleProbe' })).json.output as string, 'base64').toString(),
    ],
    ['GET /v1/health/local', async () => (await get(agent, '/v1/health/local')).json.role as string],
  ])(
    'when %s is asked 20 times while the observation is fresh, then it answers the role and makes no etcd call of its own',
    async (_route, ask) => {
      expect(await ask()).toBe('leader'); // the observation is made here (once), then served
      const roles: string[] = [];

      const calls = await etcdCalls(agent, async () => {
        for (let i = 0; i < PROBES; i++) roles.push(await ask());
      });

      expect(roles).toEqual(Array(PROBES).fill('leader'));
      expect(calls).toEqual({ statusRpcs: 0, client: Object.fromEntries(CLIENT_CALLS.map((m) => [m, 0])) });
    },
  );
});
