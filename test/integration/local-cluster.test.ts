import fs from 'node:fs';
import net from 'node:net';
import { withCluster } from '../helpers/etcd-cluster';
import { eventually } from '../helpers/eventually';

// One cluster tells the whole story: each test leaves it as the next one expects.
describe('LocalEtcdCluster (real etcd processes on loopback)', () => {
  const cluster = withCluster(3);
  // A learner (etcd-3, once added) refuses writes with "rpc not supported for learner", and etcdctl
  // picks an endpoint at random, so writes go to the running voters only.
  const voterURLs = (): string[] =>
    cluster()
      .members.filter((m) => m.name !== 'etcd-3' && m.state === 'running')
      .map((m) => m.clientURL);

  it('when 3 members start, then etcdctl lists 3 started voters', async () => {
    const members = await cluster().listMembers();

    expect(members.map((m) => m.name).sort()).toEqual(['etcd-0', 'etcd-1', 'etcd-2']);
    expect(members.every((m) => m.started && !m.isLearner)).toBe(true);
    expect(members.every((m) => /^[0-9a-f]+$/.test(m.id))).toBe(true);
    expect(cluster().clientURLs()).toHaveLength(3);
  });

  // etcd 3.4 refuses a member add ("unhealthy cluster") until the leader has been connected to every
  // voter for 5 s (--strict-reconfig-check, HealthInterval), even a learner add, and again after a fault:
  // so the add retries, and comes before the fault tests to pay that wait only once.
  it('when a reserved member is added as a learner and its process is started after someone took its client port, then it starts on a new client port and is listed as a started learner', async () => {
    const c = cluster();
    const reserved = await c.reserveMember('etcd-3');
    await eventually(() => c.etcdctl(['member', 'add', 'etcd-3', '--learner', `--peer-urls=${reserved.peerURL}`]), { within: 10_000 });
    const unstarted = (await c.listMembers()).find((m) => m.peerURLs.includes(reserved.peerURL));
    expect(unstarted).toMatchObject({ name: '', started: false, isLearner: true });
    // The race freePorts leaves open: another process binds the reserved client port first.
    // It takes whatever connects (the harness probing the port) and drops it, so that closing it leaves no socket.
    const squatter = net.createServer((socket) => socket.destroy());
    const taken = new URL(reserved.clientURL);
    await new Promise<void>((resolve) => squatter.listen(Number(taken.port), taken.hostname, resolve));

    const started = await c.addMemberProcess('etcd-3').finally(() => squatter.close());

    expect(started).toMatchObject({ name: 'etcd-3', state: 'running', peerURL: reserved.peerURL });
    expect(started.clientURL).not.toBe(reserved.clientURL);
    const listed = (await c.listMembers()).find((m) => m.peerURLs.includes(reserved.peerURL));
    expect(listed).toMatchObject({ name: 'etcd-3', started: true, isLearner: true, clientURLs: [started.clientURL] });
  });

  it('when a member is paused, then its health check times out, and when it is resumed, then it is healthy again', async () => {
    const c = cluster();
    c.pause('etcd-1');

    expect(await c.isHealthy('etcd-1', 500)).toBe(false);
    // Timed out, not refused: a frozen process's socket still accepts, nothing answers.
    expect(await c.healthCheck('etcd-1', 500)).toMatchObject({ verdict: 'timeout' });
    await expect(c.etcdctl(['endpoint', 'status', '--command-timeout=500ms'], [c.member('etcd-1').clientURL])).rejects.toThrow(
      /deadline exceeded/,
    );
    expect(c.member('etcd-1').state).toBe('paused');
    expect(c.clientURLs()).toContain(c.member('etcd-1').clientURL);
    await c.waitHealthy('etcd-0', 3000); // the other two keep quorum

    c.resume('etcd-1');

    await c.waitHealthy('etcd-1', 5000);
    expect(c.member('etcd-1').state).toBe('running');
  });

  it('when a member is killed and restarted, then it rejoins and serves what was written while it was down', async () => {
    const c = cluster();
    const before = c.member('etcd-2').dataDir;
    await c.kill('etcd-2');
    expect(c.member('etcd-2')).toMatchObject({ state: 'stopped', pid: undefined });
    // Nothing listens any more: refused, which is evidence of absence (a timeout is not).
    expect(await c.healthCheck('etcd-2', 500)).toMatchObject({ verdict: 'refused' });
    // If etcd-2 led, a write sent before the survivors elect a leader is dropped and hangs until its deadline.
    await c.waitHealthy();
    await c.etcdctl(['put', 'written-while-down', 'yes'], voterURLs());

    await c.restart('etcd-2');

    expect(c.member('etcd-2')).toMatchObject({ state: 'running', dataDir: before });
    const value = await c.etcdctl(['get', 'written-while-down', '--print-value-only'], [c.member('etcd-2').clientURL]);
    expect(value.trim()).toBe('yes');
    expect((await c.listMembers()).every((m) => m.started)).toBe(true);
  });

  it('when the cluster is destroyed (twice), then no etcd process and no data dir remains', async () => {
    const c = cluster();
    c.pause('etcd-0'); // a frozen process must die too
    const members = c.members;
    const pids = members.map((m) => m.pid);
    expect(pids.every((pid) => typeof pid === 'number')).toBe(true);

    await c.destroy();
    await c.destroy();

    for (const pid of pids) expect(() => process.kill(pid as number, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
    for (const m of members) expect(fs.existsSync(m.dataDir)).toBe(false);
    expect(c.members.every((m) => m.state === 'stopped')).toBe(true);
  });
});
