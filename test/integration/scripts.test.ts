/**
 * scripts/member-join.sh and scripts/member-leave.sh (docs/api.md §7), run under
 * bash as KubeBlocks would run them — KB_* variables in, exit code and stderr
 * out — against an agent (in this process) and a real 3-member etcd. Both ways
 * the scripts reach the agent are exercised: the agent's CLI on PATH (the agent
 * image) and curl (where the CLI is absent).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunningAgent } from '../../agent/agent';
import { withCluster, type MemberSpec } from '../helpers/etcd-cluster';
import { eventually, patience } from '../helpers/eventually';
import { freeLoopbackHost, KB_PEER_PORT } from '../helpers/loopback-host';
import { startMemberAgent } from '../helpers/membership';
import { childEnv, cliOnPath, ROOT, run, type Ran } from '../helpers/run-process';

const JOIN_SH = path.join(ROOT, 'scripts/member-join.sh');
const LEAVE_SH = path.join(ROOT, 'scripts/member-leave.sh');

describe('member-join.sh and member-leave.sh against a running agent and a real 3-member etcd', () => {
  const cluster = withCluster(3);
  let agent: RunningAgent;
  let bin: string;
  let host: string;
  let etcd3: MemberSpec;
  /** PATH with the agent's CLI first, as in the agent image. */
  let withCli: string;
  /** PATH without the CLI: the scripts fall back to curl. */
  const withoutCli = process.env.PATH ?? '/usr/bin:/bin';

  const script = (file: string, via: string, env: NodeJS.ProcessEnv): Promise<Ran> =>
    run('/bin/bash', [file], childEnv({ PATH: via, ETCD_AGENT_URL: agent.listening.url, ...env }));
  const joinEtcd3 = (via: string, extra: NodeJS.ProcessEnv = {}): Promise<Ran> =>
    script(JOIN_SH, via, {
      KB_JOIN_MEMBER_POD_NAME: 'etcd-3',
      KB_JOIN_MEMBER_POD_FQDN: host,
      // What KubeBlocks sets beside them; the scripts accept and ignore it.
      KB_JOIN_MEMBER_POD_IP: '10.0.0.3',
      KB_MEMBER_ADDRESSES: 'etcd-0.etcd-headless:2379',
      ...extra,
    });
  const leaveEtcd3 = (via: string): Promise<Ran> =>
    script(LEAVE_SH, via, { KB_LEAVE_MEMBER_POD_NAME: 'etcd-3', KB_LEAVE_MEMBER_POD_FQDN: host, KB_LEAVE_MEMBER_POD_IP: '10.0.0.3' });

  beforeAll(async () => {
    agent = await startMemberAgent(cluster(), 'etcd-0');
    bin = cliOnPath();
    withCli = `${bin}:${withoutCli}`;
    host = await freeLoopbackHost();
    etcd3 = await cluster().reserveMember('etcd-3');
  }, patience(30_000));

  afterAll(async () => {
    await agent?.stop(2000);
    if (bin !== undefined) fs.rmSync(bin, { recursive: true, force: true });
  });

  it('when KB_JOIN_MEMBER_POD_NAME or KB_LEAVE_MEMBER_POD_NAME is missing, then exit 2 with the reason', async () => {
    const join = await script(JOIN_SH, withCli, {});
    const leave = await script(LEAVE_SH, withCli, {});

    expect(join).toEqual({ code: 2, stdout: '', stderr: 'member-join: KB_JOIN_MEMBER_POD_NAME is not set\n' });
    expect(leave).toEqual({ code: 2, stdout: '', stderr: 'member-leave: KB_LEAVE_MEMBER_POD_NAME is not set\n' });
  });

  it('when neither the CLI nor curl is on PATH, then exit 1 saying so', async () => {
    const ran = await script(JOIN_SH, '/nonexistent', { KB_JOIN_MEMBER_POD_NAME: 'etcd-3' });

    expect(ran).toEqual({
      code: 1,
      stdout: '',
      stderr: 'member-join: neither etcd-lifecycle-agent nor curl is on PATH; cannot call the agent\n',
    });
  });

  it(
    'when member-join runs while the new pod starts its etcd, then it adds the learner, waits, promotes it, and exits 0',
    async () => {
      // As kbagent would: run it again while etcd refuses adds ("unhealthy cluster", exit 4) in its first 5 s.
      const joining = eventually(
        async () => {
          const r = await joinEtcd3(withCli, { ETCD_AGENT_TIMEOUT_SECONDS: '30' });
          if (r.code === 4) throw new Error(r.stderr);
          return r;
        },
        { within: 20_000, every: 300 },
      );
      // Meanwhile, the pod: its etcd starts once the member is in the list.
      const peerURL = `http://${host}:${KB_PEER_PORT}`;
      await eventually(async () => expect((await cluster().listMembers()).some((m) => m.peerURLs.includes(peerURL))).toBe(true), {
        within: 20_000,
        every: 200,
      });
      await cluster().addMemberProcess('etcd-3', { peerURL, clientURL: etcd3.clientURL, wait: false });

      const ran = await joining;

      expect(ran).toEqual({ code: 0, stdout: 'etcd-3: promoted (voter, complete)\n', stderr: '' });
      expect((await cluster().listMembers()).find((m) => m.name === 'etcd-3')).toMatchObject({ isLearner: false, peerURLs: [peerURL] });
    },
    patience(40_000),
  );

  it(
    'when member-join runs again, through the CLI and through curl, then both exit 0: already a member',
    async () => {
      const viaCli = await joinEtcd3(withCli);
      const viaCurl = await joinEtcd3(withoutCli);

      expect(viaCli).toEqual({ code: 0, stdout: 'etcd-3: already-member (voter, complete)\n', stderr: '' });
      expect(viaCurl).toEqual({ code: 0, stdout: 'etcd-3: already-member (voter, complete)\n', stderr: '' });
    },
    patience(20_000),
  );

  it.each([
    ['the CLI', true],
    ['curl', false],
  ])(
    'when a joining member never starts, then member-join (through %s) exits 3 once its deadline passes, with the reason',
    async (_via, cli) => {
      const other = await freeLoopbackHost();
      const env = { KB_JOIN_MEMBER_POD_NAME: 'etcd-4', KB_JOIN_MEMBER_POD_FQDN: other, ETCD_AGENT_TIMEOUT_SECONDS: '2' };

      // etcd refuses adds ("unhealthy cluster", exit 4) for 5 s after a member (etcd-3) starts: run it again then.
      const ran = await eventually(
        async () => {
          const r = await script(JOIN_SH, cli ? withCli : withoutCli, env);
          if (r.code === 4) throw new Error(r.stderr);
          return r;
        },
        { within: 20_000, every: 300 },
      );
      // Removed again (found by its peer URL: an unstarted member has no name yet).
      const cleanup = await script(LEAVE_SH, withCli, { KB_LEAVE_MEMBER_POD_NAME: 'etcd-4', KB_LEAVE_MEMBER_POD_FQDN: other });

      expect(ran.code).toBe(3);
      expect(ran.stdout).toBe('');
      expect(ran.stderr).toMatch(/^member-join: etcd-4: (added|in-progress) \(unstarted, not complete: call again\)\n$/);
      expect(cleanup).toEqual({ code: 0, stdout: 'etcd-4: removed\n', stderr: '' });
    },
    patience(30_000),
  );

  it(
    'when the TLS setting says https and PEER_ENDPOINT gives the pod an address, then member-join registers https://<address>:2380, exits 1 (not 3) under kbagent while unfinished, and member-leave finds the member by that URL',
    async () => {
      const address = await freeLoopbackHost();
      const kbagent = {
        // What kbagent's container has (KubeBlocks injects the ComponentDefinition's vars into it).
        KB_AGENT_ACTION: '[{"name":"memberJoin","exec":{"command":["/scripts/member-join.sh"]}}]',
        ETCD_PEER_SCHEME: 'https',
        PEER_ENDPOINT: `etcd-40:127.9.9.9,etcd-4:${address},etcd-0:127.9.9.10`,
        ETCD_AGENT_TIMEOUT_SECONDS: '2',
      };

      // Unsafe or busy is exit 1 too under kbagent: told apart here by the reason, to run it again.
      const ran = await eventually(
        async () => {
          const r = await script(JOIN_SH, withoutCli, {
            ...kbagent,
            KB_JOIN_MEMBER_POD_NAME: 'etcd-4',
            KB_JOIN_MEMBER_POD_FQDN: 'etcd-4.unused.invalid',
          });
          if (/: (unsafe|busy): /.test(r.stderr)) throw new Error(r.stderr);
          return r;
        },
        { within: 20_000, every: 300 },
      );
      const listed = (await cluster().listMembers()).filter((m) => m.peerURLs.includes(`https://${address}:${KB_PEER_PORT}`));
      const left = await script(LEAVE_SH, withoutCli, {
        ...kbagent,
        KB_LEAVE_MEMBER_POD_NAME: 'etcd-4',
        KB_LEAVE_MEMBER_POD_FQDN: 'etcd-4.unused.invalid',
      });
      const usage = await script(JOIN_SH, withoutCli, kbagent);

      expect(ran.code).toBe(1);
      expect(ran.stderr).toMatch(/^member-join: etcd-4: (added|in-progress) \(unstarted, not complete: call again\)\n$/);
      expect(listed).toEqual([expect.objectContaining({ isLearner: true, started: false })]);
      expect(left).toEqual({ code: 0, stdout: 'etcd-4: removed\n', stderr: '' });
      expect(usage).toEqual({ code: 1, stdout: '', stderr: 'member-join: KB_JOIN_MEMBER_POD_NAME is not set\n' });
    },
    patience(30_000),
  );

  it('when a member name comes with a peer URL that is not its own, then member-join refuses: exit 1 with the conflict', async () => {
    const ran = await script(JOIN_SH, withCli, { KB_JOIN_MEMBER_POD_NAME: 'etcd-1', KB_JOIN_MEMBER_POD_FQDN: host });

    expect(ran.code).toBe(1);
    expect(ran.stdout).toBe('');
    expect(ran.stderr).toMatch(/^etcd-lifecycle-agent join: conflict: .*etcd-1.*\n$/);
  });

  it(
    'when member-leave runs twice, through the CLI and then curl, then both exit 0: removed, then already absent',
    async () => {
      const first = await leaveEtcd3(withCli);
      const second = await leaveEtcd3(withoutCli);

      expect(first).toMatchObject({ code: 0, stdout: expect.stringMatching(/^etcd-3: removed/), stderr: '' });
      expect(second).toEqual({ code: 0, stdout: 'etcd-3: already-absent\n', stderr: '' });
      expect((await cluster().listMembers()).map((m) => m.name).sort()).toEqual(['etcd-0', 'etcd-1', 'etcd-2']);
    },
    patience(30_000),
  );

  it(
    'when a token is required, then the scripts send ETCD_AGENT_TOKEN_FILE (curl: never on its command line) and fail without it',
    async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scripts-token-'));
      const tokenFile = path.join(dir, 'token');
      fs.writeFileSync(tokenFile, 'script-s3cret\n');
      const guarded = await startMemberAgent(cluster(), 'etcd-0', { ETCD_AGENT_TOKEN_FILE: tokenFile });
      const leave = (via: string, env: NodeJS.ProcessEnv): Promise<Ran> =>
        script(LEAVE_SH, via, { ETCD_AGENT_URL: guarded.listening.url, KB_LEAVE_MEMBER_POD_NAME: 'etcd-9', ...env });
      try {
        const curlWith = await leave(withoutCli, { ETCD_AGENT_TOKEN_FILE: tokenFile });
        const cliWith = await leave(withCli, { ETCD_AGENT_TOKEN_FILE: tokenFile });
        const curlWithout = await leave(withoutCli, {});

        expect(curlWith).toEqual({ code: 0, stdout: 'etcd-9: already-absent\n', stderr: '' });
        expect(cliWith).toEqual({ code: 0, stdout: 'etcd-9: already-absent\n', stderr: '' });
        expect(curlWithout.code).toBe(1);
        expect(curlWithout.stderr).toMatch(/^member-leave: unauthorized: /);
      } finally {
        await guarded.stop(2000);
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
    patience(30_000),
  );

  it(
    'when leaving would break quorum, then member-leave refuses (through the CLI and curl): exit 4 with the reason',
    async () => {
      cluster().pause('etcd-1');
      try {
        const env = { ETCD_AGENT_URL: agent.listening.url, KB_LEAVE_MEMBER_POD_NAME: 'etcd-2' };
        const viaCli = await script(LEAVE_SH, withCli, env);
        const viaCurl = await script(LEAVE_SH, withoutCli, env);

        expect(viaCli.code).toBe(4);
        expect(viaCli.stderr).toMatch(/^etcd-lifecycle-agent leave: unsafe: removing etcd-2 .*\n$/);
        expect(viaCurl.code).toBe(4);
        expect(viaCurl.stderr).toMatch(/^member-leave: unsafe: removing etcd-2 .*\n$/);
        expect((await cluster().listMembers()).map((m) => m.name).sort()).toEqual(['etcd-0', 'etcd-1', 'etcd-2']);
      } finally {
        cluster().resume('etcd-1');
      }
    },
    patience(30_000),
  );
});
