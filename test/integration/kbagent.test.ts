/**
 * POST /v1.0/action, KubeBlocks kbagent's wire format (docs/api.md §5), against a
 * real 3-member etcd: every action, and every row of the error table that a real
 * cluster can produce. One cluster tells the story; each test leaves it as the
 * next expects (a 4th member joins as a learner, is promoted, leads for a while,
 * leaves; then faults).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunningAgent } from '../../agent/agent';
import { freePort, withCluster, type MemberSpec } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';
import { freeLoopbackHost, KB_PEER_PORT } from '../helpers/loopback-host';
import { get, leaderOf, startMemberAgent } from '../helpers/membership';

const ACTION = '/v1.0/action';

interface KbAnswer {
  status: number;
  body: { output?: string; error?: string; message?: string; requestId?: string };
}

async function kbCall(
  agent: RunningAgent | string,
  body: unknown,
  init: { raw?: string; contentType?: string; token?: string } = {},
): Promise<KbAnswer> {
  const url = typeof agent === 'string' ? agent : agent.listening.url;
  const headers: Record<string, string> = { 'Content-Type': init.contentType ?? 'application/json' };
  if (init.token !== undefined) headers.Authorization = `Bearer ${init.token}`;
  const res = await fetch(`${url}${ACTION}`, { method: 'POST', headers, body: init.raw ?? JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as KbAnswer['body'] };
}

/** The decoded output: JSON of a §4 result, or the bare text of roleProbe. */
function output(answer: KbAnswer): string {
  expect(answer).toMatchObject({ status: 200, body: { output: expect.any(String) } });
  return Buffer.from(answer.body.output as string, 'base64').toString('utf8');
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a §4 result, looked into field by field
function result(answer: KbAnswer): any {
  return JSON.parse(output(answer));
}

describe('POST /v1.0/action (kbagent wire format) against a real 3-member etcd', () => {
  const cluster = withCluster(3);
  const agents = new Map<string, RunningAgent>();
  const extra: RunningAgent[] = [];
  let host: string;
  let etcd3: MemberSpec;
  const join3 = (timeoutSeconds = 10): object => ({
    action: 'memberJoin',
    parameters: { KB_JOIN_MEMBER_POD_NAME: 'etcd-3', KB_JOIN_MEMBER_POD_FQDN: host },
    timeoutSeconds,
  });
  const agentOf = (name: string): RunningAgent => agents.get(name) as RunningAgent;
  const roleOf = async (name: string): Promise<string> => output(await kbCall(agentOf(name), { action: 'roleProbe' }));
  /** The role etcd itself gives `name` now: leader or follower. */
  const realRoleOf = async (name: string): Promise<string> => ((await leaderOf(cluster())).name === name ? 'leader' : 'follower');

  beforeAll(async () => {
    for (const name of ['etcd-0', 'etcd-1', 'etcd-2']) agents.set(name, await startMemberAgent(cluster(), name));
    host = await freeLoopbackHost();
    etcd3 = await cluster().reserveMember('etcd-3');
  }, patience(30_000));

  afterAll(async () => {
    await Promise.all([...agents.values(), ...extra].map((a) => a.stop(2000)));
  });

  describe('requests it refuses before reaching etcd', () => {
    it.each([
      ['the body is not JSON', { raw: '{"action": "roleProbe",' }, /not valid JSON/],
      ['the body is form data sent as text/plain', { raw: 'action=roleProbe', contentType: 'text/plain' }, /not valid JSON/],
      ['the body is a JSON array', { raw: '[]' }, /JSON object/],
      ['the body is larger than 64 KiB', { raw: JSON.stringify({ action: 'roleProbe', arguments: 'x'.repeat(70_000) }) }, /64 KiB/],
    ])('when %s, then HTTP 200 {error: badRequest} (not the v1 envelope)', async (_what, init, message) => {
      const answer = await kbCall(agentOf('etcd-0'), undefined, init);

      expect(answer).toEqual({ status: 200, body: { error: 'badRequest', message: expect.stringMatching(message) } });
    });

    it.each([
      ['no action', { parameters: {} }, /action/],
      ['a parameter that is not a string', { action: 'memberJoin', parameters: { KB_JOIN_MEMBER_POD_NAME: 3 } }, /KB_JOIN_MEMBER_POD_NAME/],
      ['a timeoutSeconds that is not a number', { action: 'roleProbe', timeoutSeconds: '30' }, /timeoutSeconds/],
      ['memberJoin without KB_JOIN_MEMBER_POD_NAME', { action: 'memberJoin', parameters: {} }, /KB_JOIN_MEMBER_POD_NAME is required/],
      ['memberLeave without KB_LEAVE_MEMBER_POD_NAME', { action: 'memberLeave' }, /KB_LEAVE_MEMBER_POD_NAME is required/],
      ['a member name that is not DNS-1123', { action: 'memberJoin', parameters: { KB_JOIN_MEMBER_POD_NAME: 'Etcd_3' } }, /DNS-1123/],
      [
        'an FQDN that makes no peer URL',
        { action: 'memberLeave', parameters: { KB_LEAVE_MEMBER_POD_NAME: 'etcd-3', KB_LEAVE_MEMBER_POD_FQDN: 'a/b' } },
        /peer/,
      ],
    ])('when the body has %s, then {error: badRequest} naming the problem', async (_what, body, message) => {
      const answer = await kbCall(agentOf('etcd-0'), body);

      expect(answer).toEqual({ status: 200, body: { error: 'badRequest', message: expect.stringMatching(message) } });
    });

    it('when the action is not one the agent performs, then {error: notDefined}', async () => {
      const answer = await kbCall(agentOf('etcd-0'), { action: 'dataDump', parameters: {} });

      expect(answer).toEqual({ status: 200, body: { error: 'notDefined', message: expect.stringContaining('dataDump') } });
    });

    it('when kbagent fields arguments, retryPolicy, rerun and nonBlocking come along, then they are ignored', async () => {
      const answer = await kbCall(agentOf('etcd-0'), {
        action: 'roleProbe',
        arguments: ['x'],
        retryPolicy: { maxRetries: 3, retryInterval: 1000 },
        rerun: true,
        nonBlocking: false,
      });

      expect(output(answer)).toBe(await realRoleOf('etcd-0'));
    });

    it('when a token is configured and the call carries none, then the v1 envelope with 401 (auth is not kbagent-shaped)', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kbagent-token-'));
      const tokenFile = path.join(dir, 'token');
      fs.writeFileSync(tokenFile, 's3cret\n');
      const guarded = await startMemberAgent(cluster(), 'etcd-0', { ETCD_AGENT_TOKEN_FILE: tokenFile });
      extra.push(guarded);

      const refused = await kbCall(guarded, { action: 'roleProbe' });
      const accepted = await kbCall(guarded, { action: 'roleProbe' }, { token: 's3cret' });

      expect(refused.status).toBe(401);
      expect(refused.body).toMatchObject({ requestId: expect.any(String), error: { code: 'unauthorized' } });
      expect(output(accepted)).toBe(await realRoleOf('etcd-0'));
      fs.rmSync(dir, { recursive: true, force: true });
    });
  });

  it('when roleProbe asks the agents of the three members, then one answers leader (the real one) and two follower, as bare base64 text', async () => {
    const leader = await leaderOf(cluster());

    const roles = Object.fromEntries(await Promise.all(['etcd-0', 'etcd-1', 'etcd-2'].map(async (n) => [n, await roleOf(n)])));

    expect(roles[leader.name]).toBe('leader');
    expect(Object.values(roles).sort()).toEqual(['follower', 'follower', 'leader']);
  });

  it(
    'when memberJoin adds a member whose etcd has not started, then {error: inProgress}, twice, and etcd lists one learner at http://{fqdn}:2380',
    async () => {
      // etcd refuses any member add ("unhealthy cluster") until its peers have been connected for 5 s:
      // that refusal is preconditionFailed, and the call is repeated as kbagent would.
      const first = await eventually(
        async () => {
          const answer = await kbCall(agentOf('etcd-0'), join3());
          if (answer.body.error === 'preconditionFailed') throw new Error(answer.body.message);
          return answer;
        },
        { within: 15_000, every: 300 },
      );
      const second = await kbCall(agentOf('etcd-1'), join3());

      expect(first).toEqual({ status: 200, body: { error: 'inProgress', message: expect.stringContaining('etcd-3: added (unstarted)') } });
      expect(second).toEqual({
        status: 200,
        body: { error: 'inProgress', message: expect.stringContaining('etcd-3: in-progress (unstarted)') },
      });
      const peerURL = `http://${host}:${KB_PEER_PORT}`;
      const listed = (await cluster().listMembers()).filter((m) => m.peerURLs.includes(peerURL));
      expect(listed).toEqual([expect.objectContaining({ isLearner: true, started: false })]);
    },
    patience(30_000),
  );

  it('when another member joins while etcd-3 is still a learner, then {error: busy}', async () => {
    const other = await freeLoopbackHost();

    const answer = await kbCall(agentOf('etcd-0'), {
      action: 'memberJoin',
      parameters: { KB_JOIN_MEMBER_POD_NAME: 'etcd-4', KB_JOIN_MEMBER_POD_FQDN: other },
    });

    expect(answer).toEqual({ status: 200, body: { error: 'busy', message: expect.stringContaining('learner') } });
  });

  it('when a name comes with a peer URL that is not its own, then conflict is {error: failed}', async () => {
    const answer = await kbCall(agentOf('etcd-0'), {
      action: 'memberJoin',
      parameters: { KB_JOIN_MEMBER_POD_NAME: 'etcd-1', KB_JOIN_MEMBER_POD_FQDN: host },
    });

    expect(answer).toEqual({ status: 200, body: { error: 'failed', message: expect.stringContaining('etcd-1') } });
  });

  it(
    "when the learner's etcd runs, then roleProbe of its own agent answers learner, and memberJoin then succeeds with the §4 result as output",
    async () => {
      await cluster().addMemberProcess('etcd-3', { peerURL: `http://${host}:${KB_PEER_PORT}`, clientURL: etcd3.clientURL });
      // Its agent promotes its learner by itself one interval (1 s) after it starts: ask at once.
      agents.set('etcd-3', await startMemberAgent(cluster(), 'etcd-3'));
      const role = await roleOf('etcd-3');

      const answer = await eventually(
        async () => {
          const a = await kbCall(agentOf('etcd-0'), join3());
          if (a.body.error === 'inProgress') throw new Error(a.body.message);
          return a;
        },
        { within: 15_000, every: 300 },
      );

      expect(role).toBe('learner');
      const joined = result(answer);
      expect(joined).toMatchObject({
        requestId: expect.any(String),
        action: 'memberJoin',
        outcome: expect.stringMatching(/^(promoted|already-member)$/),
        complete: true,
        phase: 'voter',
        member: { name: 'etcd-3', isLearner: false, started: true, peerURLs: [`http://${host}:${KB_PEER_PORT}`] },
        cluster: { members: 4, voters: 4, learners: 0 },
      });
      expect(Object.keys(joined)[0]).toBe('requestId');
      // The role comes from the shared observation (docs/api.md GET /v1/role): an observation begun after
      // the promotion was answered names the voter's role.
      const promotedAt = Date.now();
      const real = await realRoleOf('etcd-3');
      const local = await eventually(
        async () => {
          const a = await get(agentOf('etcd-3'), '/v1/health/local');
          if (!(Date.parse(a.json.observedAt) >= promotedAt)) throw new Error(`not observed since the promotion: ${a.text.slice(0, 300)}`);
          return a;
        },
        { within: 10_000, every: 100 },
      );
      expect(local.json.role).toBe(real);
      // The roleProbe asked now is served from that observation or a newer one.
      expect(await roleOf('etcd-3')).toBe(real);
      expect(result(await kbCall(agentOf('etcd-2'), join3()))).toMatchObject({ outcome: 'already-member', complete: true });
    },
    patience(40_000),
  );

  it(
    "when switchover runs on the leader's agent, then leadership moves away; with KB_SWITCHOVER_CANDIDATE_NAME, it moves to that member",
    async () => {
      const before = await leaderOf(cluster());

      const away = result(await kbCall(agentOf(before.name), { action: 'switchover', parameters: {} }));
      const after = await leaderOf(cluster());
      const back = result(
        await kbCall(agentOf('etcd-0'), { action: 'switchover', parameters: { KB_SWITCHOVER_CANDIDATE_NAME: before.name } }),
      );

      expect(away).toMatchObject({ action: 'leaderTransfer', outcome: 'transferred', complete: true });
      expect(after.name).not.toBe(before.name);
      expect(away.leader.name).toBe(after.name);
      expect(back).toMatchObject({ outcome: 'transferred', leader: { name: before.name } });
      await eventually(async () => expect(await roleOf(before.name)).toBe('leader'), { within: 5000 });
    },
    patience(30_000),
  );

  it('when switchover names a candidate that is not a member, then not-found is {error: failed}', async () => {
    const answer = await kbCall(agentOf('etcd-0'), { action: 'switchover', parameters: { KB_SWITCHOVER_CANDIDATE_NAME: 'etcd-9' } });

    expect(answer).toEqual({ status: 200, body: { error: 'failed', message: expect.stringContaining('etcd-9') } });
  });

  it(
    'when memberLeave is called twice for etcd-3, then removed and then already-absent, both as output',
    async () => {
      await agentOf('etcd-3').stop(2000);
      agents.delete('etcd-3');
      const leave = {
        action: 'memberLeave',
        parameters: { KB_LEAVE_MEMBER_POD_NAME: 'etcd-3', KB_LEAVE_MEMBER_POD_FQDN: host },
        timeoutSeconds: 20,
      };

      const first = result(await kbCall(agentOf('etcd-0'), leave));
      const second = result(await kbCall(agentOf('etcd-1'), leave));

      expect(first).toMatchObject({ action: 'memberLeave', outcome: 'removed', complete: true, cluster: { members: 3, voters: 3 } });
      expect(second).toMatchObject({ outcome: 'already-absent', complete: true });
      expect((await cluster().listMembers()).map((m) => m.name).sort()).toEqual(['etcd-0', 'etcd-1', 'etcd-2']);
    },
    patience(30_000),
  );

  describe('with etcd-1 paused', () => {
    beforeAll(() => cluster().pause('etcd-1'));
    afterAll(() => cluster().resume('etcd-1'));

    it('when memberLeave asks to remove etcd-2, which would leave 1 healthy voter of 2, then unsafe is {error: preconditionFailed}', async () => {
      const answer = await kbCall(agentOf('etcd-0'), { action: 'memberLeave', parameters: { KB_LEAVE_MEMBER_POD_NAME: 'etcd-2' } });

      expect(answer).toEqual({ status: 200, body: { error: 'preconditionFailed', message: expect.stringContaining('etcd-2') } });
      expect((await cluster().listMembers()).map((m) => m.name).sort()).toEqual(['etcd-0', 'etcd-1', 'etcd-2']);
    });

    it('when a 1 s memberJoin spends its deadline waiting for the silent member, then {error: timedOut} and nothing is added', async () => {
      // Status calls may take 3 s here, so the probe under the lock outlasts the 1 s deadline,
      // and the call stops before sending MemberAdd ("the deadline passed while sending add").
      // It reaches etcd through etcd-0 alone, so that nothing else the call does waits on etcd-1.
      const slow = await startMemberAgent(cluster(), 'etcd-0', {
        ETCD_AGENT_ENDPOINTS: cluster().member('etcd-0').clientURL,
        ETCD_AGENT_STATUS_TIMEOUT_MS: '3000',
        ETCD_AGENT_HEALTH_MAX_AGE_MS: '6000',
      });
      extra.push(slow);

      const answer = await kbCall(slow, {
        action: 'memberJoin',
        parameters: { KB_JOIN_MEMBER_POD_NAME: 'etcd-5', KB_JOIN_MEMBER_POD_FQDN: await freeLoopbackHost() },
        timeoutSeconds: 1,
      });

      expect(answer).toEqual({ status: 200, body: { error: 'timedOut', message: expect.stringContaining('deadline') } });
      expect(await cluster().listMembers()).toHaveLength(3);
    });
  });

  it(
    'when the agent can reach no etcd, then unavailable is {error: failed} for every action that needs etcd',
    async () => {
      const dead = `http://127.0.0.1:${await freePort()}`;
      const lost = await startMemberAgent(cluster(), 'etcd-0', { ETCD_AGENT_ENDPOINTS: dead, ETCD_AGENT_LOCAL_ENDPOINT: dead });
      extra.push(lost);

      const leave = await kbCall(lost, { action: 'memberLeave', parameters: { KB_LEAVE_MEMBER_POD_NAME: 'etcd-2' }, timeoutSeconds: 2 });
      const probe = await kbCall(lost, { action: 'roleProbe', timeoutSeconds: 2 });

      expect(leave).toEqual({ status: 200, body: { error: 'failed', message: expect.any(String) } });
      expect(probe).toEqual({ status: 200, body: { error: 'failed', message: expect.stringContaining(dead) } });
    },
    patience(20_000),
  );
});
