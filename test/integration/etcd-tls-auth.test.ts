/**
 * The agent against a real etcd that demands TLS with client certificates, and
 * against one with authentication enabled: join, leave and health work with
 * the right credentials, and wrong ones answer `unavailable` naming the cause.
 *
 * With auth on, what etcd lets a user without the root role (and no user at all)
 * do changed between versions (the README's table, asserted here per version by
 * calling each RPC): MemberAdd/Remove/Promote need root everywhere; MoveLeader
 * needs it from 3.5.28; 3.4.23 checks nothing on MemberList, Status and Alarm,
 * while 3.5.35, 3.6.16 and 3.7.3 answer them to any user but not to none. So the
 * agent's user needs the root role for membership changes, and its Status calls
 * carry a token (asked of a voter: a learner refuses Authenticate).
 */
import { execFile } from 'node:child_process';
import { noop } from 'cockatiel';
import { Etcd3 } from 'etcd3';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RunningAgent, startAgent } from '../../agent/agent';
import { loadConfig } from '../../agent/config/config';
import { createLogger } from '../../agent/observability/logger';
import { createMetrics } from '../../agent/observability/metrics';
import { createPki, TestPki } from '../helpers/certs';
import { findEtcdctl } from '../../scripts/local-cluster';
import { LocalEtcdCluster, MemberSpec, startTestCluster } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';
import type { Answer } from '../helpers/http-call';
import { captureLogs } from '../helpers/log-capture';
import { changesSent, etcdAcceptsChanges, get, leaderOf, post, startMemberAgent, until } from '../helpers/membership';
import { itOnFirstVersion } from '../helpers/version-scope';

const JOIN = '/v1/members/join';
const CORE_NAMES = ['etcd-0', 'etcd-1', 'etcd-2'];
const LEAVE = '/v1/members/leave';

/**
 * POSTs `body` again while the answer says "not yet" (202) or "try again" (a retryable error), as
 * a controller does (docs/api.md §1): what counts is the answer it ends with, not how many calls that
 * took. Answers the last, at the latest after `boundMs` of patience (TEST_TIME_SCALE lengthens it).
 */
async function repeat(agent: RunningAgent, path: string, body: object, boundMs = 45_000): Promise<Answer> {
  const until = Date.now() + patience(boundMs);
  for (;;) {
    const answer = await post(agent, path, body);
    const again = answer.status === 202 || answer.json?.error?.retryable === true;
    if (!again || Date.now() > until) return answer;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

/** Join a reserved member, start its etcd, wait until it is a voter, then make it leave: the whole lifecycle. */
async function joinAndLeave(cluster: LocalEtcdCluster, agent: RunningAgent, name: string): Promise<void> {
  const spec: MemberSpec = await cluster.reserveMember(name);
  const added = await post(agent, JOIN, { name, peerURLs: [spec.peerURL] });
  expect([added.status, added.json.outcome]).toEqual([202, 'added']);

  await cluster.addMemberProcess(name, { wait: false });
  // The learner answers the agent's Status calls too (with auth on, etcd 3.5+ wants a token there,
  // which a learner cannot grant: the agent asks a voter for it, status-token.ts).
  const seen = await until(
    () => get(agent, '/v1/health'),
    (a) =>
      a.json.members?.some(
        (m: { name: string; isLearner: boolean; reachable: boolean }) => m.name === name && m.isLearner && m.reachable,
      ) === true,
    20_000,
  );
  expect(seen.json.status).toBe('healthy');
  const voter = await repeat(agent, JOIN, { name, peerURLs: [spec.peerURL], wait: true, timeoutSeconds: 20 });
  expect({ http: voter.status, ...voter.json }).toMatchObject({
    http: 200,
    complete: true,
    phase: 'voter',
    member: { name, isLearner: false, started: true },
  });

  const left = await repeat(agent, LEAVE, { name, peerURLs: [spec.peerURL], timeoutSeconds: 30 });
  expect([left.status, left.json.outcome]).toEqual([200, 'removed']);
  await cluster.kill(name);
  expect((await cluster.listMembers()).map((m) => m.name).sort()).toEqual(['etcd-0', 'etcd-1', 'etcd-2']);
}

/**
 * /v1/health answers healthy with 3 voters. Polled for a few seconds: a fresh agent's first
 * observation also pays for the TLS handshakes or the token exchange (bcrypt on etcd's side),
 * which may outlast the 1 s observation budget (that observation answers `unknown`, as it should).
 */
async function expectHealthy(agent: RunningAgent): Promise<void> {
  await eventually(
    async () => {
      const health = await get(agent, '/v1/health');
      expect({ http: health.status, ...health.json }).toMatchObject({
        http: 200,
        status: 'healthy',
        quorum: { voters: 3, healthyVoters: 3 },
      });
    },
    { within: 10_000, every: 250 },
  );
}

/** A refusal that names its cause: 503 `unavailable`, retryable, with a message matching `cause`. */
function expectUnavailable(answer: { status: number; json: { error?: { code: string; message: string } } }, cause: RegExp): void {
  expect(answer.status).toBe(503);
  expect(answer.json.error?.code).toBe('unavailable');
  expect(answer.json.error?.message).toMatch(cause);
}

/**
 * `ask`'s refusal names its cause within a few calls: a fresh agent's first call
 * may end while gRPC is still handshaking, and says only "etcd is unreachable" (503, as true); once
 * the handshake has failed, the refusal says why.
 */
async function expectRefusalNaming(
  ask: () => Promise<{ status: number; json: { error?: { code: string; message: string } } }>,
  cause: RegExp,
): Promise<void> {
  await eventually(async () => expectUnavailable(await ask(), cause), { within: 15_000, every: 200 });
}

describe('when etcd serves its clients over TLS and requires client certificates', () => {
  let pki: TestPki;
  let cluster: LocalEtcdCluster;
  const agents: RunningAgent[] = [];
  const startAgentWith = async (env: Record<string, string>): Promise<RunningAgent> => {
    const agent = await startMemberAgent(cluster, 'etcd-0', env);
    agents.push(agent);
    return agent;
  };

  beforeAll(async () => {
    pki = await createPki();
    cluster = await startTestCluster(3, {
      clientTls: {
        ca: pki.ca.cert,
        serverCert: pki.server.cert,
        serverKey: pki.server.key,
        clientCert: pki.client.cert,
        clientKey: pki.client.key,
      },
    });
    await etcdAcceptsChanges(cluster);
  }, patience(60_000));
  afterAll(async () => {
    await Promise.all(agents.map((a) => a.stop(2000)));
    await cluster?.destroy();
    await pki?.cleanup();
  });

  it('then its client URLs are https and a client without a certificate is refused by etcd itself', async () => {
    expect(cluster.clientURLs().every((u) => u.startsWith('https://'))).toBe(true);
    await expect(memberListWithoutClientCert(cluster, pki)).rejects.toThrow(/bad certificate|certificate required|context deadline/i);
  });

  it(
    'when the agent has the CA and a client certificate, then health, join and leave work',
    async () => {
      const agent = await startAgentWith({
        ETCD_AGENT_ETCD_CA_FILE: pki.ca.cert,
        ETCD_AGENT_ETCD_CERT_FILE: pki.client.cert,
        ETCD_AGENT_ETCD_KEY_FILE: pki.client.key,
      });
      await expectHealthy(agent);
      expect((await get(agent, '/v1/health/local')).status).toBe(200);

      await joinAndLeave(cluster, agent, 'etcd-3');
      expect(await changesSent(agent.metrics)).toMatchObject({ add: 1, remove: 1 });
    },
    patience(60_000),
  );

  it('when the agent shows no client certificate, then calls answer 503 unavailable and say why', async () => {
    const agent = await startAgentWith({ ETCD_AGENT_ETCD_CA_FILE: pki.ca.cert });
    await expectRefusalNaming(() => get(agent, '/v1/members'), /refused the agent TLS client certificate/);
    await expectRefusalNaming(
      () => post(agent, JOIN, { name: 'etcd-9', peerURLs: ['http://127.0.0.1:9'], timeoutSeconds: 3 }),
      /refused the agent TLS client certificate/,
    );
  });

  it('when the agent shows a client certificate of another CA, then calls answer 503 unavailable and say why', async () => {
    const agent = await startAgentWith({
      ETCD_AGENT_ETCD_CA_FILE: pki.ca.cert,
      ETCD_AGENT_ETCD_CERT_FILE: pki.rogueClient.cert,
      ETCD_AGENT_ETCD_KEY_FILE: pki.rogueClient.key,
    });
    await expectRefusalNaming(() => get(agent, '/v1/members'), /refused the agent TLS client certificate/);
  });

  it('when the agent does not trust the CA of etcd, then calls answer 503 unavailable and say why', async () => {
    const agent = await startAgentWith({
      ETCD_AGENT_ETCD_CA_FILE: pki.rogueCa.cert,
      ETCD_AGENT_ETCD_CERT_FILE: pki.client.cert,
      ETCD_AGENT_ETCD_KEY_FILE: pki.client.key,
      // A max age that holds the failed handshakes: an observation not done within it answers `unknown`,
      // and this case is about the refusal that names its cause.
      ETCD_AGENT_HEALTH_MAX_AGE_MS: '5000',
    });
    await expectRefusalNaming(() => get(agent, '/v1/members'), /does not trust the TLS certificate of etcd/);
    // Health reports the cluster unavailable from where the agent stands; it never claims it healthy.
    const health = await get(agent, '/v1/health');
    expect(health.status).toBe(503);
    expect(health.json.status).toBe('unavailable');
  });
});

/** etcdctl with the CA but without the client pair (the harness always presents it). */
function memberListWithoutClientCert(cluster: LocalEtcdCluster, pki: TestPki): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      findEtcdctl(),
      [`--endpoints=${cluster.clientURLs()[0]}`, `--cacert=${pki.ca.cert}`, '--dial-timeout=2s', '--command-timeout=3s', 'member', 'list'],
      { env: { ETCDCTL_API: '3', PATH: process.env.PATH }, timeout: 10_000 },
      (err, stdout, stderr) => (err ? reject(new Error(String(stderr))) : resolve(String(stdout))),
    );
  });
}

describe('when etcd has authentication enabled', () => {
  let cluster: LocalEtcdCluster;
  let dir: string;
  const secrets = {
    root: randomBytes(12).toString('hex'),
    limited: randomBytes(12).toString('hex'),
    bare: randomBytes(12).toString('hex'),
  };
  const files = { root: '', limited: '', wrong: '', bare: '' };
  const started: Array<{ agent: RunningAgent; logs: () => string }> = [];
  const as = (user: 'root' | 'limited' | 'bare', file: string): Record<string, string> => ({
    ETCD_AGENT_ETCD_USERNAME: user,
    ETCD_AGENT_ETCD_PASSWORD_FILE: file,
  });
  const startWith = async (env: Record<string, string>, endpoints?: string[]): Promise<{ agent: RunningAgent; logs: () => string }> => {
    const one = await startLoggedAgent(cluster, env, endpoints);
    started.push(one);
    return one;
  };
  const version = (): string => cluster.etcd.version;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcd-auth-'));
    files.root = path.join(dir, 'root-password');
    files.limited = path.join(dir, 'limited-password');
    files.wrong = path.join(dir, 'wrong-password');
    fs.writeFileSync(files.root, `${secrets.root}\n`, { mode: 0o600 });
    fs.writeFileSync(files.limited, `${secrets.limited}\n`, { mode: 0o600 });
    fs.writeFileSync(files.wrong, 'not-the-password\n', { mode: 0o600 });
    files.bare = path.join(dir, 'bare-password');
    fs.writeFileSync(files.bare, `${secrets.bare}\n`, { mode: 0o600 });
    cluster = await startTestCluster(3);
    // As an operator would: root, a role on the agent's key prefix, a user with only that role, then auth on.
    await cluster.etcdctl(['user', 'add', `root:${secrets.root}`]);
    await cluster.etcdctl(['user', 'grant-role', 'root', 'root']).catch(() => undefined); // 3.4 makes the role at auth enable
    await cluster.etcdctl(['role', 'add', 'agent-keys']);
    await cluster.etcdctl(['role', 'grant-permission', 'agent-keys', '--prefix=true', 'readwrite', '/etcd-lifecycle-agent/']);
    await cluster.etcdctl(['user', 'add', `limited:${secrets.limited}`]);
    await cluster.etcdctl(['user', 'grant-role', 'limited', 'agent-keys']);
    await cluster.etcdctl(['user', 'add', `bare:${secrets.bare}`]);
    await cluster.etcdctl(['auth', 'enable']);
    // The harness's own member lists and new members' --initial-cluster: etcd 3.5+ answers MemberList only to a user.
    cluster.authenticateAs(`root:${secrets.root}`);
    await etcdAcceptsChanges(cluster);
  }, patience(60_000));
  afterAll(async () => {
    await Promise.all(started.map((s) => s.agent.stop(2000)));
    await cluster?.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('then etcd refuses a client without credentials', async () => {
    cluster.authenticateAs(undefined);
    try {
      await expect(cluster.etcdctl(['put', '/etcd-lifecycle-agent/x', '1'])).rejects.toThrow(
        /user name is empty|permission denied|invalid auth/i,
      );
    } finally {
      cluster.authenticateAs(`root:${secrets.root}`);
    }
  });

  it("then each RPC the agent sends is allowed to a user without the root role, and to no user at all, exactly as this etcd version's rule says (README table)", async () => {
    const leader = await leaderOf(cluster);
    const follower = cluster.members.find((m) => CORE_NAMES.includes(m.name) && m.name !== leader.name) as { clientURL: string };
    const seen: Record<string, Record<Who, boolean>> = {};
    for (const who of ['limited', 'anonymous'] as const) {
      const client = new Etcd3({
        hosts: [follower.clientURL],
        ...(who === 'limited' ? { auth: { username: 'limited', password: secrets.limited } } : {}),
        faultHandling: { global: noop, host: () => noop },
      });
      try {
        for (const rpc of RPCS) (seen[rpc] ??= { limited: false, anonymous: false })[who] = await allowed(() => callRpc(client, rpc));
      } finally {
        client.close();
      }
    }
    process.stdout.write(
      `etcd ${version()} with auth on, allowed (user without root / no user): ${RPCS.map((r) => `${r} ${seen[r].limited ? 'yes' : 'no'}/${seen[r].anonymous ? 'yes' : 'no'}`).join(', ')}\n`,
    );
    const expected = Object.fromEntries(
      RPCS.map((rpc) => [rpc, { limited: etcdAllows(version(), rpc, 'limited'), anonymous: etcdAllows(version(), rpc, 'anonymous') }]),
    );
    expect(seen).toEqual(expected);
  });

  it(
    'when the agent authenticates as a user with the root role, then health, join and leave work, the learner answering Status too',
    async () => {
      const { agent } = await startWith(as('root', files.root));
      await expectHealthy(agent);

      await joinAndLeave(cluster, agent, 'etcd-3');
      expect(await changesSent(agent.metrics)).toMatchObject({ add: 1, remove: 1 });
    },
    patience(60_000),
  );

  it(
    'when the agent reaches etcd through a follower only, then a learner is still promoted (a promote a follower forwards loses the credentials before etcd 3.5.28 and 3.6.6, etcd-io/etcd#20757)',
    async () => {
      const leader = await leaderOf(cluster);
      const follower = cluster.members.find((m) => CORE_NAMES.includes(m.name) && m.name !== leader.name) as { clientURL: string };
      const { agent } = await startWith(as('root', files.root), [follower.clientURL]);

      await joinAndLeave(cluster, agent, 'etcd-3');
      expect(await changesSent(agent.metrics)).toMatchObject({ add: 1, promote: 1, remove: 1 });
    },
    patience(90_000),
  );

  it('when the agent user lacks the root role, then reads and health work but a join and a leave answer 503 unavailable naming the RPC and the root role, and nothing changes', async () => {
    const { agent } = await startWith(as('limited', files.limited));
    expect((await get(agent, '/v1/members')).status).toBe(200);
    await expectHealthy(agent);
    const before = await cluster.listMembers();
    const spec = await cluster.reserveMember('etcd-4');

    const join = await post(agent, JOIN, { name: 'etcd-4', peerURLs: [spec.peerURL], timeoutSeconds: 10 });

    expectUnavailable(
      join,
      /etcd denied permission for MemberAdd to the agent user "limited": membership changes need the root role.*etcdctl user grant-role limited root/,
    );
    expect(join.json.error).toMatchObject({
      retryable: false,
      details: { rpc: 'MemberAdd', role: 'root', etcd: expect.stringMatching(/PERMISSION_DENIED|permission denied/) },
    });
    expect(await cluster.listMembers()).toEqual(before);
    expect(await changesSent(agent.metrics)).toMatchObject({ add: 1 }); // sent once, refused by etcd

    // MemberRemove too: a learner added by root stays when the limited user asks to remove it.
    await cluster.etcdctl(['member', 'add', 'etcd-4', '--learner', `--peer-urls=${spec.peerURL}`]);
    const leave = await post(agent, LEAVE, { name: 'etcd-4', peerURLs: [spec.peerURL], timeoutSeconds: 10 });
    expectUnavailable(leave, /denied permission for MemberRemove to the agent user "limited".*root role/);
    const stayed = (await cluster.listMembers()).filter((m) => m.peerURLs.includes(spec.peerURL));
    expect(stayed).toHaveLength(1);
    await cluster.etcdctl(['member', 'remove', stayed[0].id]);
  });

  it('when the agent user lacks the root role, then a leader transfer works where this etcd checks no permission on MoveLeader (3.4), and elsewhere answers 503 naming MoveLeader and the root role', async () => {
    const { agent } = await startWith(as('limited', files.limited));
    const leader = await leaderOf(cluster);
    const to = CORE_NAMES.find((n) => n !== leader.name) as string;

    const transfer = await post(agent, '/v1/leader/transfer', { to, timeoutSeconds: 10 });

    if (etcdAllows(version(), 'MoveLeader', 'limited')) {
      expect([transfer.status, transfer.json.outcome]).toEqual([200, 'transferred']);
    } else {
      expectUnavailable(
        transfer,
        /etcd denied permission for MoveLeader to the agent user "limited": it needs the root role from etcd 3\.5\.28/,
      );
      expect((await leaderOf(cluster)).name).toBe(leader.name);
    }
  });

  it('when the agent user has no role at all, then a join answers 503 naming the key prefix its lock needs (3.4: already the member list, made linearizable by a read of that prefix)', async () => {
    const { agent } = await startWith(as('bare', files.bare));
    const members = await get(agent, '/v1/members');
    const join = await post(agent, JOIN, { name: 'etcd-6', peerURLs: ['http://127.0.0.1:9'], timeoutSeconds: 5 });

    if (cluster.etcd.minor === '3.4') {
      expectUnavailable(
        members,
        /etcd denied permission for the read that makes the member list linearizable on etcd 3\.4 to the agent user "bare".*readwrite on ETCD_AGENT_KEY_PREFIX/,
      );
    } else {
      expect(members.status).toBe(200);
    }
    expectUnavailable(join, /etcd denied permission.*readwrite on ETCD_AGENT_KEY_PREFIX/);
  });

  it('when the password is wrong, then calls answer 503 unavailable naming the credentials', async () => {
    const { agent } = await startWith(as('root', files.wrong));
    expectUnavailable(await get(agent, '/v1/members'), /rejected the agent credentials \(ETCD_AGENT_ETCD_USERNAME/);
    const join = await post(agent, JOIN, { name: 'etcd-5', peerURLs: ['http://127.0.0.1:9'], timeoutSeconds: 5 });
    expectUnavailable(join, /rejected the agent credentials/);
    expect((await get(agent, '/v1/health')).status).toBe(503);
  });

  // 3.4.23 answers MemberList, Status and the alarm list to no user, but the read that makes the list
  // linearizable there is a KV read, which wants one; 3.5+ refuses MemberList itself. So no membership
  // call works on any version, while health, which can do with a voter's own list, works on 3.4.23.
  it('when the agent has no etcd credentials at all, then its calls answer 503 saying etcd wants a user, and health works only where etcd answers anyone (3.4.23)', async () => {
    const { agent } = await startWith({});

    expectUnavailable(
      await get(agent, '/v1/members'),
      /etcd has authentication enabled and refused a call without a user: set ETCD_AGENT_ETCD_USERNAME/,
    );
    const health = await until(
      () => get(agent, '/v1/health'),
      (a) => a.json.status !== 'unknown',
    );
    expect(health.json.status).toBe(etcdAllows(version(), 'MemberList', 'anonymous') ? 'healthy' : 'unavailable');
  });

  // The agent's failover past a frozen endpoint, alike against every etcd: on the run's first version (version-scope.ts).
  itOnFirstVersion(
    'when the first endpoint is frozen (SIGSTOP), then an authenticated agent still answers its reads before their deadline',
    async () => {
      const urls = cluster.clientURLs();
      cluster.pause('etcd-0');
      try {
        // Reads are bounded by ETCD_AGENT_TIMEOUT_SECONDS (docs/api.md §4 Deadlines): one stuck on the frozen
        // endpoint would answer 504 `timeout` at it. The member list is hedged across endpoints; operation
        // records go through the pooled client, whose Authenticate tries etcd-0 first and must give up on
        // it after one attempt (3 s).
        const { agent } = await startWith({ ...as('root', files.root), ETCD_AGENT_TIMEOUT_SECONDS: '10' }, urls);
        const members = await get(agent, '/v1/members');
        const operations = await get(agent, '/v1/operations');
        expect([members.status, operations.status]).toEqual([200, 200]);
      } finally {
        cluster.resume('etcd-0');
      }
    },
    patience(40_000),
  );

  it('when the test is over, then no password reached any agent log', () => {
    const logs = started.map((s) => s.logs()).join('\n');
    expect(logs.length).toBeGreaterThan(0);
    expect(logs).not.toContain(secrets.root);
    expect(logs).not.toContain(secrets.limited);
    expect(logs).not.toContain(secrets.bare);
    expect(logs).not.toContain('not-the-password');
  });
});

/** The RPCs the agent sends whose permission etcd checks, as etcd names them. */
const RPCS = ['MemberList', 'Status', 'Alarm', 'MoveLeader', 'MemberAdd', 'MemberRemove', 'MemberPromote'] as const;
type Rpc = (typeof RPCS)[number];
type Who = 'limited' | 'anonymous';

/**
 * Whether etcd `version`, with auth on, lets `who` (a user without the root role, or no user) call
 * `rpc`: the README's table. Measured by the test above on the harness's version of each minor; the
 * other patch releases as read in etcd's source (the CVE-2026-33413 fix of 3.4.42, 3.5.28 and 3.6.9
 * closed MemberList, Alarm and Status to all but root; 3.4.43, 3.5.29 and 3.6.10 opened MemberList and
 * Alarm to any user again, 3.5.32 and 3.6.12 Status; 3.6.0 closed Status and MoveLeader to all but root).
 */
function etcdAllows(version: string, rpc: Rpc, who: Who): boolean {
  const [, minor, patch] = version.split('.').map(Number);
  const before = (m: number, p: number): boolean => minor < m || (minor === m && patch < p);
  const noCheck = minor === 4 ? patch < 42 : minor === 5 ? patch < 28 : minor === 6 ? patch < 9 : false;
  switch (rpc) {
    case 'MemberAdd':
    case 'MemberRemove':
    case 'MemberPromote':
      return false;
    case 'MoveLeader':
      return before(5, 28);
    case 'MemberList':
    case 'Alarm': {
      const rootOnly = (minor === 4 && patch === 42) || (minor === 5 && patch === 28) || (minor === 6 && patch === 9);
      return who === 'anonymous' ? noCheck : !rootOnly;
    }
    case 'Status': {
      if (minor === 6 && who === 'anonymous') return false; // 3.6.0 checks Status
      if (who === 'anonymous') return noCheck;
      return minor === 4 ? patch < 42 : minor === 5 ? patch < 28 || patch >= 32 : minor === 6 ? patch >= 12 : true;
    }
  }
}

/** Calls `rpc` through `client` so that, allowed, it changes nothing: MoveLeader at a follower, changes of a member that does not exist. */
async function callRpc(client: Etcd3, rpc: Rpc): Promise<unknown> {
  const at = { deadline: new Date(Date.now() + 5000) };
  switch (rpc) {
    case 'MemberList':
      return client.cluster.memberList({ linearizable: true }, at);
    case 'Status':
      return client.maintenance.status(at);
    case 'Alarm':
      return client.maintenance.alarm({ action: 'Get', memberID: 0, alarm: 'None' }, at);
    case 'MoveLeader':
      return client.maintenance.moveLeader({ targetID: '1' }, at);
    case 'MemberAdd':
      // Allowed, it would add a learner that never starts; every version refuses it to this user.
      return client.cluster.memberAdd({ peerURLs: ['http://127.0.0.1:9'], isLearner: true }, at);
    case 'MemberRemove':
      return client.cluster.memberRemove({ ID: '1' }, at);
    case 'MemberPromote':
      return client.cluster.memberPromote({ ID: '1' }, at);
  }
}

/** True unless `call` is refused for want of permission or of a user; any other answer ("not leader", "member not found") got past the check. */
async function allowed(call: () => Promise<unknown>): Promise<boolean> {
  try {
    await call();
    return true;
  } catch (err) {
    return !/permission denied|user name is empty/i.test(String(err));
  }
}

/** An agent for member etcd-0 that logs (debug) into a string, so a test can look for secrets in it. */
async function startLoggedAgent(
  cluster: LocalEtcdCluster,
  env: Record<string, string>,
  endpoints: string[] = cluster.clientURLs(),
): Promise<{ agent: RunningAgent; logs: () => string }> {
  const { stream, text } = captureLogs();
  const { config } = loadConfig({
    ETCD_AGENT_LISTEN: '127.0.0.1:0',
    ETCD_AGENT_ENDPOINTS: endpoints.join(','),
    ETCD_AGENT_LOCAL_ENDPOINT: cluster.member('etcd-0').clientURL,
    ETCD_AGENT_MEMBER_NAME: 'etcd-0',
    ...env,
  });
  const agent = await startAgent(config, {
    logger: createLogger({ stream, level: 'debug' }),
    metrics: createMetrics({ defaultMetrics: false }),
  });
  return { agent, logs: text };
}
