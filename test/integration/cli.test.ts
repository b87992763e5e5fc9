/**
 * The command line of docs/api.md §7, run as the built binary against an agent
 * (in this process) and a real 3-member etcd: each exit code reached for real.
 * 0 complete, 1 failed (also: agent unreachable), 2 usage, 3 in progress,
 * 4 refused as unsafe or busy (or no quorum: membership-quorum.test.ts). And every command's --help.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { RunningAgent } from '../../agent/agent';
import { COMMANDS } from '../../agent/cli/command-table';
import { renderUsage } from '../../agent/lib/usage';
import { freePort, withCluster, type MemberSpec } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';
import { startMemberAgent } from '../helpers/membership';
import { RaftRecord } from '../helpers/raft-record';
import { runCli, type Ran } from '../helpers/run-process';

describe('--help of every command, as the built binary', () => {
  it.each(COMMANDS.flatMap((c) => ['--help', '-h'].map((flag) => [c.usage.name, flag, c.usage] as const)))(
    'when %s %s is run, then it prints its own usage and exits 0',
    async (name, flag, usage) => {
      const ran = await runCli([name, flag]);

      expect(ran).toEqual({ code: 0, stdout: renderUsage(usage), stderr: '' });
    },
  );
});

describe('etcd-lifecycle-agent CLI against a running agent and a real 3-member etcd', () => {
  const cluster = withCluster(3);
  let agent: RunningAgent;
  let etcd3: MemberSpec;
  let etcd4: MemberSpec;
  // One line a person reads, unless the test asks for the JSON answer.
  const cli = (...args: string[]): Promise<Ran> =>
    runCli([...args, ...(args.includes('--json') ? [] : ['--summary']), '--agent', agent.listening.url]);

  beforeAll(async () => {
    agent = await startMemberAgent(cluster(), 'etcd-0');
    etcd3 = await cluster().reserveMember('etcd-3');
    etcd4 = await cluster().reserveMember('etcd-4');
  }, patience(30_000));

  afterAll(async () => {
    await agent?.stop(2000);
  });

  it.each([
    [['join'], /join needs exactly one member NAME/],
    [['leave', 'etcd-3', '--wait'], /leave does not take --wait/],
    [['members', '--timeout-seconds', '0'], /from 1 to 60/],
    [['members', '--agent', 'not-a-url'], /not http\(s\):\/\/host:port/],
    [['frobnicate'], /unknown command frobnicate/],
  ])('when the command line is %j, then exit 2 with the reason and the usage', async (args, reason) => {
    const ran = await runCli(args);

    expect(ran.code).toBe(2);
    expect(ran.stderr).toMatch(reason);
    expect(ran.stderr).toContain('usage:');
    expect(ran.stdout).toBe('');
  });

  it('when no agent listens at --agent, then exit 1 with one line saying why', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;

    const ran = await runCli(['members', '--agent', url]);

    expect(ran.code).toBe(1);
    expect(ran.stderr).toBe(`etcd-lifecycle-agent members: cannot reach the agent at ${url}/v1/members: ECONNREFUSED\n`);
  });

  it("when the agent listens on 10080, one of the Fetch standard's bad ports (Node's fetch refuses it without connecting), then the CLI reaches it all the same", async () => {
    const onBadPort = await startMemberAgent(cluster(), 'etcd-1', { ETCD_AGENT_LISTEN: '127.0.0.1:10080' });
    try {
      expect(onBadPort.listening.url).toBe('http://127.0.0.1:10080');
      const ran = await runCli(['members', '--summary', '--agent', onBadPort.listening.url]);

      expect(ran.stderr).toBe('');
      expect(ran.code).toBe(0);
      expect(ran.stdout).toMatch(/^cluster [0-9a-f]+: 3 members/);
    } finally {
      await onBadPort.stop(2000);
    }
  });

  it('when something at --agent takes the connection and never answers, then exit 1 once the time is up, with one line saying so', async () => {
    const taken: net.Socket[] = [];
    const silent = net.createServer((socket) => void taken.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
    try {
      const ran = await runCli(['members', '--timeout-seconds', '1', '--agent', url]);

      // It waited the call's deadline plus 5 s (docs/cli.md), as it says: 1 + 5 = 6 s.
      expect(ran.code).toBe(1);
      expect(ran.stderr).toBe(`etcd-lifecycle-agent members: the agent at ${url}/v1/members did not answer within 6 s\n`);
    } finally {
      for (const socket of taken) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('when ETCD_AGENT_URL names the agent, then members lists the three members (exit 0), and --json prints the full answer', async () => {
    const human = await runCli(['members', '--summary'], { ETCD_AGENT_URL: agent.listening.url });
    const json = await cli('members', '--json');
    // Not a terminal: the JSON answer is the default (docs/api.md §7).
    const piped = await runCli(['members'], { ETCD_AGENT_URL: agent.listening.url });
    expect(JSON.parse(piped.stdout)).toMatchObject({ cluster: { members: 3 } });

    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^cluster [0-9a-f]+: 3 members \(3 voters, 0 learners\)\n/);
    for (const name of ['etcd-0', 'etcd-1', 'etcd-2'])
      expect(human.stdout).toMatch(new RegExp(`^  ${name}\\t[0-9a-f]+\\tvoter\\thttp://`, 'm'));
    expect(json.code).toBe(0);
    const body = JSON.parse(json.stdout);
    expect(body).toMatchObject({ requestId: expect.any(String), cluster: { members: 3 } });
    expect(body.members).toHaveLength(3);
  });

  it('when health is asked of a healthy cluster, then exit 0 with a summary line', async () => {
    const ran = await eventually(
      async () => {
        const r = await cli('health');
        if (r.code !== 0) throw new Error(r.stderr || r.stdout);
        return r;
      },
      { within: 10_000 },
    );

    expect(ran.stdout).toMatch(/^healthy: 3\/3 voters healthy \(quorum 2\), leader etcd-\d\n/);
  });

  it(
    'when a member is joined whose etcd has not started, then exit 3 (added), and again exit 3 (in-progress)',
    async () => {
      // etcd refuses member adds ("unhealthy cluster", exit 4) until its peers have been connected for 5 s.
      const first = await eventually(
        async () => {
          const r = await cli('join', 'etcd-3', '--peer-url', etcd3.peerURL);
          if (r.code === 4) throw new Error(r.stderr);
          return r;
        },
        { within: 15_000, every: 300 },
      );
      const second = await cli('join', 'etcd-3', '--peer-url', etcd3.peerURL);

      expect(first).toEqual({ code: 3, stdout: 'etcd-3: added (unstarted, not complete: call again)\n', stderr: '' });
      expect(second).toEqual({ code: 3, stdout: 'etcd-3: in-progress (unstarted, not complete: call again)\n', stderr: '' });
    },
    patience(30_000),
  );

  it('when another member joins while etcd-3 is a learner, then busy: exit 4 with the reason', async () => {
    const ran = await cli('join', 'etcd-4', '--peer-url', etcd4.peerURL);

    expect(ran.code).toBe(4);
    expect(ran.stdout).toBe('');
    expect(ran.stderr).toMatch(/^etcd-lifecycle-agent join: busy: .*learner.*\(refused; call again later\)\n$/);
  });

  it('when promote names no member, then not-found: exit 1', async () => {
    const ran = await cli('promote', 'etcd-9');

    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/^etcd-lifecycle-agent promote: not-found: .*etcd-9/);
  });

  it(
    'when its etcd starts and join --wait is called, then exit 0 once it is a voter',
    async () => {
      await cluster().addMemberProcess('etcd-3', { wait: false });

      const ran = await cli('join', 'etcd-3', '--peer-url', etcd3.peerURL, '--wait', '--timeout-seconds', '30');

      expect(ran.code).toBe(0);
      expect(ran.stdout).toMatch(/^etcd-3: (promoted|already-member) \(voter, complete\)\n$/);
      const listed = (await cluster().listMembers()).find((m) => m.name === 'etcd-3');
      expect(listed).toMatchObject({ isLearner: false, started: true });
    },
    patience(40_000),
  );

  it(
    'when etcd-3 is asked to leave twice, then exit 0 both times: removed, then already-absent',
    async () => {
      const first = await cli('leave', 'etcd-3', '--timeout-seconds', '20');
      const second = await cli('leave', 'etcd-3');

      expect(first).toMatchObject({ code: 0, stdout: expect.stringMatching(/^etcd-3: removed/) });
      expect(second).toEqual({ code: 0, stdout: 'etcd-3: already-absent\n', stderr: '' });
    },
    patience(30_000),
  );

  it(
    'when a token is configured, then --token-file carries it (exit 0) and a call without it is refused (exit 1)',
    async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-token-'));
      const tokenFile = path.join(dir, 'token');
      fs.writeFileSync(tokenFile, 'cli-s3cret\n');
      const guarded = await startMemberAgent(cluster(), 'etcd-0', { ETCD_AGENT_TOKEN_FILE: tokenFile });
      try {
        const withToken = await runCli(['transfer-leader', '--summary', '--agent', guarded.listening.url, '--token-file', tokenFile]);
        const fromEnv = await runCli(['transfer-leader', '--summary', '--agent', guarded.listening.url], {
          ETCD_AGENT_TOKEN_FILE: tokenFile,
        });
        const without = await runCli(['transfer-leader', '--summary', '--agent', guarded.listening.url]);

        expect(withToken.code).toBe(0);
        expect(withToken.stdout).toMatch(/^(transferred|not-leader) \(leader: etcd-\d\)\n$/);
        expect(fromEnv.code).toBe(0);
        expect(without.code).toBe(1);
        expect(without.stderr).toMatch(/^etcd-lifecycle-agent transfer-leader: unauthorized: /);
      } finally {
        await guarded.stop(2000);
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
    patience(30_000),
  );

  it(
    'when two of three members are paused, then health exits 1, printing the observation and why',
    async () => {
      cluster().pause('etcd-1');
      cluster().pause('etcd-2');
      try {
        // An observation that could not read the member list within its budget says `unknown` (true,
        // and also exit 1); the figures come with the next that could, which is waited for.
        const { ran, from, to } = await eventually(
          async () => {
            const sent = Date.now();
            const answer = await cli('health');
            expect(answer.stdout).not.toMatch(/^unknown:/);
            return { ran: answer, from: sent, to: Date.now() };
          },
          { within: 20_000, every: 250 },
        );

        expect(ran.code).toBe(1);
        // etcd-0 alone counts as healthy while it names a leader: 1/3 then, 0/3 once it names none, as its
        // own log says (a follower keeps naming one with pre-vote, 3.5+, until it campaigns without it,
        // 3.4; a leader steps down an election timeout after losing its quorum). Where its view changed
        // while the command ran, the observation may have seen either. The member list (read at etcd-0
        // without a quorum) gives 3 voters.
        // The observation may be up to the max age (1 s, configuration.md) older than the command.
        const raft = RaftRecord.ofFiles(() => cluster().members, 3);
        const moments = [
          from - 1000,
          ...raft
            .events()
            .filter((e) => e.member === 'etcd-0' && e.at >= from - 1000 && e.at <= to)
            .map((e) => e.at),
        ];
        const views = new Set(moments.map((t) => (raft.leaderSeenBy('etcd-0', t) === undefined ? 0 : 1)));
        expect(ran.stdout).toMatch(new RegExp(`^unavailable: [${[...views].join('')}]/3 voters healthy \\(quorum 2\\)`));
        expect(ran.stdout).toMatch(/^ {2}etcd-1\t\w+\tunreachable/m);
        expect(ran.stderr).toMatch(/^etcd-lifecycle-agent health: /);
      } finally {
        cluster().resume('etcd-1');
        cluster().resume('etcd-2');
      }
    },
    patience(30_000),
  );

  it(
    'when removing a voter would leave too few healthy voters, then unsafe: exit 4, and --json prints the error envelope',
    async () => {
      // From a cluster the agent sees whole again: the case before paused two members, and until they
      // are back the agent rightly answers unavailable (no quorum), not unsafe.
      await eventually(async () => expect((await cli('health')).code).toBe(0), { within: 20_000, every: 250 });
      cluster().pause('etcd-1');
      try {
        const ran = await runCli(['leave', 'etcd-2', '--json', '--agent', agent.listening.url]);

        expect(ran.code).toBe(4);
        expect(JSON.parse(ran.stdout)).toMatchObject({ error: { code: 'unsafe', retryable: true } });
        expect(ran.stderr).toMatch(/^etcd-lifecycle-agent leave: unsafe: removing etcd-2 .*\(refused; call again later\)\n$/);
      } finally {
        cluster().resume('etcd-1');
      }
    },
    patience(30_000),
  );
});
