/**
 * The etcd client certificate, key and CA rotated under a running agent, against
 * a real etcd that serves TLS and requires client certificates
 * (`--client-cert-auth --trusted-ca-file`). While calls keep running (health,
 * members, a learner joined and made to leave, over and over), the agent's
 * files change the ways they change in production:
 *
 *   1. the pair is rewritten in place, certificate first, key a poll later (a new
 *      certificate beside the old key must not be used);
 *   2. the CA file is rewritten in place to a bundle of the old and the new CA;
 *   3. a Secret volume's `..data` symlink is swapped to a pair signed by the new CA;
 *   4. etcd is then restarted, member by member, serving a certificate of the
 *      new CA and trusting only the new CA: every connection is new, and one made
 *      with any earlier certificate is refused (checked with etcdctl);
 *   5. the CA file becomes the new CA alone.
 *
 * No call fails through it all; a full join and leave of a real member follows.
 * A refusal counts only where etcd's own log explains it (helpers/call-loop.ts
 * `judge`): a health 503 observed during an election, a join refused inside
 * etcd's guard after a member restart.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { RunningAgent, startAgent } from '../../agent/agent';
import { loadConfig } from '../../agent/config/config';
import { Deadline } from '../../agent/lib/deadline';
import { MembershipLock } from '../../agent/etcd/lock';
import { createLogger } from '../../agent/observability/logger';
import { createMetrics } from '../../agent/observability/metrics';
import { findEtcdctl } from '../../scripts/local-cluster';
import { CallLoop, judge, LoopCall } from '../helpers/call-loop';
import { createPki, KeyPair, TestPki } from '../helpers/certs';
import { LocalEtcdCluster, startTestCluster } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';
import { etcdAcceptsChanges, get, leaderOf, post } from '../helpers/membership';
import { changedLeadership, RaftRecord } from '../helpers/raft-record';

const RELOADED = 'etcd TLS credentials reloaded';
/** The TTL of the lock held across a rotation: short, so that it must be renewed many times meanwhile. */
const LOCK_TTL_S = 3;
/** How long the agent keeps a retired client before closing it unless pinned (agent/etcd/endpoint-clients.ts: two attempt timeouts and a margin). */
const RETIRE_GRACE_MS = 7000;
const REJECTED = 'etcd TLS files changed but do not load';

let oldPki: TestPki;
let newPki: TestPki;
let cluster: LocalEtcdCluster;
let agent: RunningAgent;
let loop: CallLoop;
let raft: RaftRecord;
let logText = '';
/** When each reload was logged. */
const reloads: number[] = [];
/** The files: what etcd and the test harness use, and the agent's own. */
const f = {
  etcdTrust: '', // etcd's --trusted-ca-file, also the CA the harness trusts
  etcdServer: { cert: '', key: '' } as KeyPair,
  harness: { cert: '', key: '' } as KeyPair, // the client pair of the harness's health checks and etcdctl
  agentCa: '', // ETCD_AGENT_ETCD_CA_FILE, a plain file rewritten in place
  secret: '', // a Secret volume: tls.crt, tls.key → ..data/… → ..v1/…
  firstAgentPair: { cert: '', key: '' } as KeyPair, // copies of the pair the agent started with
};

const cat = (...files: string[]): Buffer => Buffer.concat(files.map((file) => fs.readFileSync(file)));
const reloadCount = (): number => logText.split(RELOADED).length - 1;
async function waitReloads(n: number): Promise<number> {
  await eventually(async () => expect(reloadCount()).toBeGreaterThanOrEqual(n), { within: 10_000, every: 50 });
  return reloads[n - 1];
}

/** Writes a new Secret version directory and swaps `..data` to it atomically, as the kubelet does. */
function swapSecret(version: string, pair: KeyPair): void {
  const dir = path.join(f.secret, version);
  fs.mkdirSync(dir);
  fs.copyFileSync(pair.cert, path.join(dir, 'tls.crt'));
  fs.copyFileSync(pair.key, path.join(dir, 'tls.key'));
  const previous = fs.readlinkSync(path.join(f.secret, '..data'));
  fs.symlinkSync(version, path.join(f.secret, '..data_tmp'));
  fs.renameSync(path.join(f.secret, '..data_tmp'), path.join(f.secret, '..data'));
  fs.rmSync(path.join(f.secret, previous), { recursive: true });
}

beforeAll(async () => {
  [oldPki, newPki] = await Promise.all([createPki(), createPki()]);
  const dir = fs.mkdtempSync(path.join(oldPki.dir, 'rotation-'));
  f.etcdTrust = path.join(dir, 'etcd-trust.pem');
  fs.writeFileSync(f.etcdTrust, cat(oldPki.ca.cert, newPki.ca.cert));
  f.etcdServer = await oldPki.ca.issue('etcd-server', { into: { cert: path.join(dir, 'server.crt'), key: path.join(dir, 'server.key') } });
  f.harness = await oldPki.ca.issue('harness', {
    hosts: [],
    into: { cert: path.join(dir, 'harness.crt'), key: path.join(dir, 'harness.key') },
  });
  f.agentCa = path.join(dir, 'agent-ca.pem');
  fs.copyFileSync(oldPki.ca.cert, f.agentCa);
  f.secret = path.join(dir, 'secret');
  fs.mkdirSync(path.join(f.secret, '..v1'), { recursive: true });
  await oldPki.ca.issue('agent', {
    hosts: [],
    into: { cert: path.join(f.secret, '..v1', 'tls.crt'), key: path.join(f.secret, '..v1', 'tls.key') },
  });
  fs.symlinkSync('..v1', path.join(f.secret, '..data'));
  for (const file of ['tls.crt', 'tls.key']) fs.symlinkSync(path.join('..data', file), path.join(f.secret, file));
  f.firstAgentPair = { cert: path.join(dir, 'first-agent.crt'), key: path.join(dir, 'first-agent.key') };
  fs.copyFileSync(path.join(f.secret, 'tls.crt'), f.firstAgentPair.cert);
  fs.copyFileSync(path.join(f.secret, 'tls.key'), f.firstAgentPair.key);

  cluster = await startTestCluster(3, {
    clientTls: {
      ca: f.etcdTrust,
      serverCert: f.etcdServer.cert,
      serverKey: f.etcdServer.key,
      clientCert: f.harness.cert,
      clientKey: f.harness.key,
    },
  });
  raft = RaftRecord.ofFiles(() => cluster.members, 3);
  await etcdAcceptsChanges(cluster);

  const { config } = loadConfig({
    ETCD_AGENT_LISTEN: '127.0.0.1:0',
    ETCD_AGENT_ENDPOINTS: cluster.clientURLs().join(','),
    ETCD_AGENT_LOCAL_ENDPOINT: cluster.member('etcd-0').clientURL,
    ETCD_AGENT_MEMBER_NAME: 'etcd-0',
    ETCD_AGENT_ETCD_CA_FILE: f.agentCa,
    ETCD_AGENT_ETCD_CERT_FILE: path.join(f.secret, 'tls.crt'),
    ETCD_AGENT_ETCD_KEY_FILE: path.join(f.secret, 'tls.key'),
  });
  const stream = new Writable({
    write(chunk, _encoding, done) {
      const line = String(chunk);
      if (line.includes(RELOADED)) reloads.push(Date.now());
      logText += line;
      done();
    },
  });
  agent = await startAgent(config, { logger: createLogger({ stream, level: 'info' }), metrics: createMetrics({ defaultMetrics: false }) });
}, patience(90_000));

afterAll(async () => {
  await loop?.stop();
  await agent?.stop(2000);
  await cluster?.destroy();
  await Promise.all([oldPki?.cleanup(), newPki?.cleanup()]);
});

/**
 * Waits until the loop has had a health call and a members call answered well that started in the
 * current phase at or after `since` (after a swap: on the new clients), so the phase is seen to work
 * before the next change; the loop's other calls go on meanwhile.
 */
async function servedSince(since: number): Promise<void> {
  const served = (kind: LoopCall['kind']): boolean =>
    loop.calls.some((c) => c.kind === kind && c.phase === loop.phase && c.start >= since && c.verdict === 'ok');
  await eventually(async () => expect({ health: served('health'), members: served('members') }).toEqual({ health: true, members: true }), {
    within: 10_000,
    every: 20,
  });
}

/** The calls of `calls` that did not get a contract answer of a reachable etcd, for a readable failure. */
const failures = (calls: LoopCall[]): LoopCall[] => calls.filter((c) => c.verdict === 'failed');

describe('when the etcd client certificates are rotated while the agent serves (client-cert auth)', () => {
  it(
    'then no call fails: in place, by Secret symlink swap, CA bundle then new CA alone, across an etcd restart that trusts only the new CA',
    async () => {
      const health = await eventually(
        async () => {
          const answer = await get(agent, '/v1/health');
          expect(answer.json.status).toBe('healthy');
          return answer;
        },
        { within: 15_000, every: 200 },
      );
      expect(health.json.quorum).toMatchObject({ voters: 3, healthyVoters: 3 });
      loop = new CallLoop(agent, (i) => cluster.reservePeerURL(`rotation-${i}`)).start();
      await servedSince(0);

      // 1. In place, certificate first: the agent sees a certificate beside the wrong key and keeps the old pair.
      loop.phase = 'in-place';
      const second = await oldPki.ca.issue('agent-2', { hosts: [] });
      fs.writeFileSync(path.join(f.secret, '..v1', 'tls.crt'), fs.readFileSync(second.cert));
      await eventually(async () => expect(logText.includes(REJECTED)).toBe(true), { within: 10_000, every: 50 });
      expect(reloadCount()).toBe(0);
      const written = [Date.now()];
      fs.writeFileSync(path.join(f.secret, '..v1', 'tls.key'), fs.readFileSync(second.key));
      const swaps = [await waitReloads(1)];

      // 2. The CA file, in place: the old CA and the new one.
      loop.phase = 'ca-bundle';
      written.push(Date.now());
      fs.writeFileSync(f.agentCa, cat(oldPki.ca.cert, newPki.ca.cert));
      swaps.push(await waitReloads(2));

      // 3. A Secret volume's symlink swap to a pair of the new CA.
      loop.phase = 'secret-swap';
      const third = await newPki.ca.issue('agent-3', { hosts: [] });
      written.push(Date.now());
      swapSecret('..v2', third);
      swaps.push(await waitReloads(3));
      await servedSince(swaps[2]);

      // 4. etcd moves to the new CA: its server certificate, and trust in the new CA alone, member by
      // member (the leader last, so leadership moves once). Old connections die with the processes.
      loop.phase = 'etcd-restart';
      const leader = await leaderOf(cluster);
      const order = [...cluster.members.map((m) => m.name).filter((n) => n !== leader.name), leader.name];
      await newPki.ca.issue('etcd-server', { into: f.etcdServer });
      await newPki.ca.issue('harness', { hosts: [], into: f.harness });
      fs.copyFileSync(newPki.ca.cert, f.etcdTrust);
      const restarting = Date.now();
      for (const name of order) {
        await cluster.restart(name);
        // As a rolling restart waits for readiness: the next member stops only once the agent's
        // client has a connection to this one again. etcd answering the harness is not that: the
        // agent's channel reconnects on its next call, and until it has, the agent rightly counts
        // the member as not answering, so stopping the next one then leaves it one voter of three.
        await eventually(
          async () => {
            const members = (await get(agent, '/v1/health')).json.members as Array<{ name: string; reachable: boolean }>;
            expect(members.find((m) => m.name === name)?.reachable).toBe(true);
          },
          { within: 10_000, every: 50 },
        );
      }
      // The leader went last, so leadership moved away from it when it stopped, as etcd logged it.
      const moved = raft.elections().filter((e) => e.from >= restarting && changedLeadership(e));
      expect(moved.filter((e) => e.before?.leader === leader.name).map((e) => e.after?.leader)).toEqual([
        expect.not.stringMatching(leader.name),
      ]);
      loop.phase = 'after-restart';
      // Every earlier agent certificate is now refused by etcd itself.
      for (const pair of [f.firstAgentPair, second]) {
        await expect(etcdctlWith(cluster, newPki.ca.cert, pair, ['member', 'list'])).rejects.toThrow(
          /bad certificate|unknown certificate authority|context deadline|tls/i,
        );
      }
      // All three voters answer the agent's Status calls, each on a connection made since the restart
      // (`degraded` is allowed: the loop's unstarted learner is unreachable by design).
      await eventually(async () => expect((await get(agent, '/v1/health')).json.quorum).toMatchObject({ voters: 3, healthyVoters: 3 }), {
        within: 10_000,
        every: 200,
      });

      // 5. The CA file: the new CA alone.
      loop.phase = 'new-ca-only';
      written.push(Date.now());
      fs.writeFileSync(f.agentCa, fs.readFileSync(newPki.ca.cert));
      swaps.push(await waitReloads(4));
      await servedSince(swaps[3]);
      await loop.stopChanges();

      // A real member joins (learner, then voter) and leaves, over the rotated credentials.
      loop.phase = 'join-leave';
      await joinAndLeave(cluster, agent, 'etcd-3');
      // Refusals are kept only where etcd's log explains them (call-loop.ts judge), in whatever phase.
      const calls = judge(await loop.stop(), raft);

      expect(failures(calls)).toEqual([]);
      expect(reloadCount()).toBe(4);
      const count = (kind: LoopCall['kind'], phase?: string): number =>
        calls.filter((c) => c.kind === kind && c.verdict === 'ok' && (phase === undefined || c.phase === phase)).length;
      for (const phase of ['in-place', 'ca-bundle', 'secret-swap', 'etcd-restart', 'after-restart', 'new-ca-only']) {
        expect({ phase, health: count('health', phase) > 0, members: count('members', phase) > 0 }).toEqual({
          phase,
          health: true,
          members: true,
        });
      }
      expect(count('join')).toBeGreaterThan(3);
      expect(count('leave')).toBeGreaterThan(3);
      // The swaps happened under load: calls were in flight at those instants, and finished well.
      const inFlight = swaps.flatMap((at) => loop.inFlightAt(at));
      expect(inFlight.length).toBeGreaterThan(0);
      expect(inFlight.filter((c) => c.verdict !== 'ok')).toEqual([]);
      // Every lock the joins and leaves took was released with its lease: none is left in etcd.
      await eventually(async () => expect(await cluster.etcdctl(['lease', 'list'])).toMatch(/found 0 leases/), {
        within: 15_000,
        every: 250,
      });
      const lags = swaps.map((at, i) => at - written[i]);
      process.stdout.write(
        `etcd TLS rotation: ${summary(calls, inFlight.length)}; file written → new clients in use: ${lags.join(', ')} ms\n`,
      );
    },
    patience(240_000),
  );

  it(
    'when a membership lock is held across a rotation, then its lease survives (past its TTL) and is released with it',
    async () => {
      // The agent's own key prefix, so the agent sees the lock taken; another agent's name, so it does not take it over.
      const lock = new MembershipLock(agent.cluster, {
        keyPrefix: agent.config.keyPrefix,
        agent: 'etcd-1',
        logger: agent.logger,
        ttlSeconds: LOCK_TTL_S,
      });
      const held = await lock.acquire({ action: 'memberJoin', member: { name: 'x', peerURLs: [] } }, Deadline.in(10_000));
      const kv = (await agent.cluster.raw.get(`${agent.config.keyPrefix}lock`).exec()).kvs[0];
      const before = reloadCount();
      swapSecret('..v3', await newPki.ca.issue('agent-4', { hosts: [] }));
      await waitReloads(before + 1);

      // The lease lives on the pinned old client past the retired clients' grace and then one more TTL,
      // when a lease nobody renewed would be gone: a window of the agent's own timers, counted from the
      // moment it logged the reload.
      const reloadedAt = reloads[reloads.length - 1];
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, reloadedAt + RETIRE_GRACE_MS + LOCK_TTL_S * 1000 - Date.now())));
      expect(Number((await agent.cluster.raw.leaseClient.leaseTimeToLive({ ID: kv.lease })).TTL)).toBeGreaterThan(0);
      expect(() => held.assertHeld()).not.toThrow();
      await held.setStep('after-rotation', Deadline.in(5000));
      const join = await post(agent, '/v1/members/join', { name: 'etcd-9', peerURLs: ['http://127.0.0.1:9'], timeoutSeconds: 2 });
      expect(join.json.error?.code).toBe('busy'); // the lock is still held, as etcd sees it
      await held.release();
      await eventually(async () => expect(await cluster.etcdctl(['lease', 'list'])).toMatch(/found 0 leases/), {
        within: 10_000,
        every: 250,
      });
    },
    patience(60_000),
  );
});

/** Join a reserved member, start its etcd, wait until it is a voter, then make it leave. */
async function joinAndLeave(c: LocalEtcdCluster, a: RunningAgent, name: string): Promise<void> {
  const spec = await c.reserveMember(name);
  const body = { name, peerURLs: [spec.peerURL] };
  const added = await post(a, '/v1/members/join', body);
  expect([added.status, added.json.outcome]).toEqual([202, 'added']);
  await c.addMemberProcess(name, { wait: false });
  const voter = await post(a, '/v1/members/join', { ...body, wait: true, timeoutSeconds: 40 });
  expect({ http: voter.status, ...voter.json }).toMatchObject({ http: 200, complete: true, phase: 'voter' });
  const left = await post(a, '/v1/members/leave', { ...body, timeoutSeconds: 30 });
  expect([left.status, left.json.outcome]).toEqual([200, 'removed']);
  await c.kill(name);
}

/** etcdctl against the cluster with a given CA and client pair (not the harness's). */
function etcdctlWith(c: LocalEtcdCluster, ca: string, pair: KeyPair, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      findEtcdctl(),
      [
        `--endpoints=${c.clientURLs().join(',')}`,
        `--cacert=${ca}`,
        `--cert=${pair.cert}`,
        `--key=${pair.key}`,
        '--dial-timeout=2s',
        '--command-timeout=3s',
        ...args,
      ],
      { env: { ETCDCTL_API: '3', PATH: process.env.PATH }, timeout: 15_000 },
      (err, stdout, stderr) => (err ? reject(new Error(String(stderr) || err.message)) : resolve(String(stdout))),
    );
  });
}

function summary(calls: LoopCall[], inFlight: number): string {
  const by = new Map<string, number>();
  for (const c of calls) by.set(`${c.kind} ${c.verdict}`, (by.get(`${c.kind} ${c.verdict}`) ?? 0) + 1);
  const degraded = calls.filter((c) => c.kind === 'health' && c.result === 'degraded').length;
  return `${calls.length} calls (${[...by].map(([k, n]) => `${k} ${n}`).join(', ')}; health degraded ${degraded}); ${inFlight} in flight at the 4 swaps`;
}
