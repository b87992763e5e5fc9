/**
 * A lost disk on a cluster nothing writes to. The new member restores the leader's snapshot, taken
 * at the leader's last applied entry. etcd 3.6 sets its applied index only when it applies an
 * entry, not a snapshot, so when the snapshot arrives before the member's first publish reaches the
 * leader, etcd then refuses every publish ("too many requests": the commit index is more than 5,000
 * ahead of an applied index of 0) until one new entry arrives. Its etcd then serves no client and is
 * never promoted (membership/apply-nudge-decision.ts). The learner's own agent, finding its etcd
 * silent and its member listed as a learner, writes once through the quorum; the member then
 * applies, serves and is promoted.
 *
 * Which of the two arrives first is etcd's own race. So each replacement starts without its sidecar
 * until etcd has either published the member or refused to, and the story repeats the lost disk
 * a few times, ending early at the first refusal. It asserts: every replacement became a voter; in
 * every stalled one the agent's nudge came before the promotion (etcd stays stalled without a new
 * entry, so a stall the agent does not end fails the story); and every key the fill acknowledged is
 * there.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Writable } from 'node:stream';
import type { Etcd3 } from 'etcd3';
import { startAgent, type RunningAgent } from '../../agent/agent';
import { loadConfig } from '../../agent/config/config';
import { etcd3 } from '../../agent/etcd/etcd3-module';
import { createLogger } from '../../agent/observability/logger';
import { createMetrics } from '../../agent/observability/metrics';
import { startTestCluster, type LocalEtcdCluster } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';
import { captureLogs } from '../helpers/log-capture';
import { post } from '../helpers/membership';

/** What the fill writes: more entries than etcd's default snapshot count (10,000), and over 50 MB. */
const ENTRIES = 10_500;
const VALUE_BYTES = 5000;
const KEYS = 2000;
const PREFIX = '/etcd-lifecycle-agent/';
/** Lost disks tried, fewer when etcd stalls on one: whether it does is etcd's race (see above). */
const MAX_ATTEMPTS = 4;

/** One lost disk's replacement, as the test saw it. */
interface Attempt {
  memberId: string;
  stalled: boolean;
  nudges: number;
  /** Indexes in the learner agent's log of its first nudge and of its promotion (-1: none). */
  nudgedAt: number;
  promotedAt: number;
}

describe('a learner joining a cluster that nothing writes to', () => {
  let c: LocalEtcdCluster;
  let client: Etcd3;
  let logDir: string;
  const agents = new Set<RunningAgent>();

  beforeAll(async () => {
    logDir = fs.mkdtempSync(path.join(process.env.LOCAL_ETCD_LOG_DIR ?? '/tmp', 'idle-learner-'));
    c = await startTestCluster(3, { logDir });
    client = new (etcd3().Etcd3)({ hosts: c.clientURLs() });
  }, patience(30_000));

  afterAll(async () => {
    await Promise.all([...agents].map((a) => a.stop(2000)));
    client?.close();
    await c?.destroy();
    if (process.env.LOCAL_ETCD_LOG_DIR === undefined) fs.rmSync(logDir, { recursive: true, force: true });
  });

  async function agentBeside(name: string, env: Record<string, string>, stream?: Writable): Promise<RunningAgent> {
    const { config } = loadConfig({
      ETCD_AGENT_LISTEN: '127.0.0.1:0',
      ETCD_AGENT_MEMBER_NAME: name,
      ETCD_AGENT_KEY_PREFIX: PREFIX,
      ...env,
    });
    const logger = stream === undefined ? createLogger({ silent: true }) : createLogger({ level: 'debug', stream });
    const agent = await startAgent(config, { logger, metrics: createMetrics({ defaultMetrics: false }) });
    agents.add(agent);
    return agent;
  }

  /** Waits until no membership operation holds the lock or has a record: nothing of the agents' is still being written. */
  async function quiet(): Promise<void> {
    await eventually(
      async () => {
        const lock = await client.get(`${PREFIX}lock`).string();
        const ops = await client.getAll().prefix(`${PREFIX}operations/`).keys();
        if (lock !== null || ops.length > 0)
          throw new Error(`a membership operation is still ${lock !== null ? 'holding the lock' : 'recorded'}`);
      },
      { within: 10_000 },
    );
  }

  /** Whether etcd-3's log shows etcd refusing member `memberId`'s publish for its apply gap. */
  function refusedPublish(memberId: string): boolean {
    return fs
      .readFileSync(c.member('etcd-3').logFile, 'utf8')
      .split('\n')
      .some((l) => l.includes(`"local-member-id":"${memberId}"`) && l.includes('too many requests'));
  }

  /** Joins etcd-3 with an empty data directory and its own sidecar, and waits for it to be a voter. */
  async function replaceDisk(voterAgent: RunningAgent): Promise<Attempt> {
    const spec = await c.reserveMember('etcd-3');
    const joined = await post(voterAgent, '/v1/members/join', { name: 'etcd-3', peerURLs: [spec.peerURL] });
    expect(joined.json).toMatchObject({ outcome: 'added', member: { isLearner: true } });
    const memberId = (joined.json as { member: { id: string } }).member.id;
    // The join's own writes are done before the new member starts, so the snapshot it is sent holds the last entry.
    await quiet();

    await c.addMemberProcess('etcd-3', { wait: false });
    // First without its sidecar: either etcd stalls (its log refuses a publish as "too many requests")
    // or it publishes itself; only a stall shows what the agent does about it.
    const { stalled } = await eventually(
      async () => {
        if (refusedPublish(memberId)) return { stalled: true };
        const listed = (await c.listMembers([c.member('etcd-0').clientURL])).find((m) => m.id === memberId);
        if (listed !== undefined && listed.clientURLs.length > 0) return { stalled: false };
        throw new Error(`etcd-3 (${memberId}) has neither published itself nor been refused`);
      },
      { within: 30_000, every: 100 },
    );

    const log = captureLogs();
    const learnerAgent = await agentBeside(
      'etcd-3',
      { ETCD_AGENT_ENDPOINTS: spec.clientURL, ETCD_AGENT_LOCAL_ENDPOINT: spec.clientURL, ETCD_AGENT_LOCAL_PEER_URL: spec.peerURL },
      log.stream,
    );
    await eventually(
      async () => {
        const member = (await c.listMembers([c.member('etcd-0').clientURL])).find((m) => m.id === memberId);
        if (member === undefined || member.isLearner)
          throw new Error(`etcd-3 (${memberId}) is ${member === undefined ? 'not listed' : 'still a learner'}`);
      },
      { within: 60_000, every: 250 },
    ).catch((err: unknown) => {
      throw new Error(
        `${String(err)}; its agent's log:\n${log
          .text()
          .split('\n')
          .filter((l) => !l.includes('"level":"http"'))
          .slice(-20)
          .join('\n')}`,
      );
    });

    const nudges = (await learnerAgent.metrics.applyNudges.get()).values.find((v) => v.labels.result === 'written')?.value ?? 0;
    const messages = log
      .text()
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => (JSON.parse(l) as { message: string }).message);
    const attempt: Attempt = {
      memberId,
      stalled,
      nudges,
      nudgedAt: messages.findIndex((m) => m.startsWith('wrote once through the quorum')),
      promotedAt: messages.indexOf('promoted the learner of this pod'),
    };
    await learnerAgent.stop(2000);
    agents.delete(learnerAgent);
    return attempt;
  }

  /** The disk is lost again: etcd-3 stops, and its member is removed through the voter's agent. */
  async function loseDisk(voterAgent: RunningAgent): Promise<void> {
    await c.kill('etcd-3');
    const left = await post(voterAgent, '/v1/members/leave', { name: 'etcd-3', force: true });
    expect(left.json).toMatchObject({ outcome: 'removed' });
    await quiet();
  }

  it(
    'when a new member restores a snapshot and nothing else writes, then its agent nudges it and it becomes a voter with every key kept',
    async () => {
      const acknowledged = new Map<string, string>();
      let next = 0;
      await Promise.all(
        Array.from({ length: 64 }, async () => {
          for (let i = next++; i < ENTRIES; i = next++) {
            const key = `fill/${i % KEYS}`;
            const value = `${i}:`.padEnd(VALUE_BYTES, 'x');
            await client.put(key).value(value);
            acknowledged.set(key, value);
          }
        }),
      );
      const status = await client.maintenance.status();
      expect(Number(status.header.revision)).toBeGreaterThan(ENTRIES);
      expect(Number(status.dbSize)).toBeGreaterThan(50 * 1024 * 1024);

      const voterAgent = await agentBeside('etcd-0', {
        ETCD_AGENT_ENDPOINTS: c.clientURLs().join(','),
        ETCD_AGENT_LOCAL_ENDPOINT: c.member('etcd-0').clientURL,
      });
      const attempts: Attempt[] = [];
      for (;;) {
        attempts.push(await replaceDisk(voterAgent));
        if (attempts.some((a) => a.stalled) || attempts.length >= MAX_ATTEMPTS) break;
        await loseDisk(voterAgent);
      }

      for (const a of attempts.filter((x) => x.stalled)) {
        expect(a.nudges).toBeGreaterThanOrEqual(1);
        expect(a.nudgedAt).toBeGreaterThanOrEqual(0);
        expect(a.promotedAt).toBeGreaterThan(a.nudgedAt);
      }

      // Nothing acknowledged was lost, read through the new voter itself.
      const direct = new (etcd3().Etcd3)({ hosts: [c.member('etcd-3').clientURL] });
      try {
        // Key by key: the whole prefix at once is larger than a gRPC message may be.
        const keys = await direct.getAll().prefix('fill/').keys();
        expect(keys.length).toBe(acknowledged.size);
        const entries = [...acknowledged];
        for (let i = 0; i < entries.length; i += 100) {
          const batch = entries.slice(i, i + 100);
          const values = await Promise.all(batch.map(([key]) => direct.get(key).string()));
          expect(values).toEqual(batch.map(([, value]) => value));
        }
      } finally {
        direct.close();
      }
    },
    patience(600_000),
  );
});
