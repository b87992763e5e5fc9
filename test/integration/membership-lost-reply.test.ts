/**
 * A leave whose MemberRemove reached etcd but whose reply was lost, against a real 3-member etcd:
 * the agent's only configured endpoint is a TCP proxy that starts dropping replies the moment the
 * remove is sent. The call must still answer `removed` naming the member it removed, after failing
 * over to another member to read again, without sending the remove twice.
 */
import type { RunningAgent } from '../../agent/agent';
import { withCluster } from '../helpers/etcd-cluster';
import { changesSent, get, post, startMemberAgent } from '../helpers/membership';
import { TcpProxy } from '../helpers/tcp-proxy';
import { patience } from '../helpers/eventually';

describe('a leave whose MemberRemove reply is lost', () => {
  // The strict check would refuse the learner add for 5 s after start; it plays no part here.
  const cluster = withCluster(3, { extraArgs: ['--strict-reconfig-check=false'] });
  let proxy: TcpProxy;
  let agent: RunningAgent;

  beforeAll(async () => {
    proxy = await TcpProxy.start(cluster().member('etcd-0').clientURL);
    agent = await startMemberAgent(cluster(), 'etcd-0', { ETCD_AGENT_ENDPOINTS: proxy.url });
  });

  afterAll(async () => {
    await agent?.stop(2000);
    await proxy?.close();
  });

  it(
    'when etcd removed the member but the reply never came back, then the leave answers removed with the member, sending one remove',
    async () => {
      const spec = await cluster().reserveMember('etcd-3');
      await cluster().etcdctl(['member', 'add', 'etcd-3', '--learner', `--peer-urls=${spec.peerURL}`]);
      const id = (await cluster().listMembers()).find((m) => m.peerURLs.includes(spec.peerURL))?.id;
      expect((await get(agent, '/v1/members')).status).toBe(200);
      // The network fault starts with the remove itself: the request passes, its reply is lost.
      const cluster3 = agent.cluster;
      const removeMember = cluster3.removeMember.bind(cluster3);
      cluster3.removeMember = (memberId, deadline) => {
        proxy.dropReplies();
        return removeMember(memberId, deadline);
      };

      const reply = await post(agent, '/v1/members/leave', { name: 'etcd-3', peerURLs: [spec.peerURL] });

      expect(reply.status).toBe(200);
      expect(reply.json).toMatchObject({
        outcome: 'removed',
        complete: true,
        member: { id, peerURLs: [spec.peerURL] },
        cluster: { members: 3 },
      });
      expect(await changesSent(agent.metrics)).toMatchObject({ remove: 1 });
      expect((await cluster().listMembers()).some((m) => m.peerURLs.includes(spec.peerURL))).toBe(false);
    },
    patience(40_000),
  );
});
