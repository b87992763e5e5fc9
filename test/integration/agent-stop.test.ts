/**
 * A stopped agent leaves nothing running: no timer, socket or retry of its own holds the process,
 * also when etcd was unreachable or frozen while it ran (its loops were in their retry pauses, gRPC
 * was still connecting). A real process would otherwise wait for them at exit, and so would jest's workers.
 */
import net from 'node:net';
import { startAgent } from '../../agent/agent';
import { loadConfig } from '../../agent/config/config';
import { createLogger } from '../../agent/observability/logger';
import { eventually } from '../helpers/eventually';
import { post } from '../helpers/membership';

/** Handles holding this process open now, by kind (getActiveResourcesInfo lists no unref'd timer). */
function held(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const kind of process.getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1;
  return counts;
}

describe('stopping an agent', () => {
  const sockets: net.Socket[] = [];
  // A frozen member: it accepts connections and never answers.
  const frozen = net.createServer((socket) => sockets.push(socket));
  let frozenUrl: string;

  beforeAll(async () => {
    await new Promise<void>((resolve) => frozen.listen(0, '127.0.0.1', resolve));
    frozenUrl = `http://127.0.0.1:${(frozen.address() as net.AddressInfo).port}`;
  });

  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => frozen.close(resolve));
  });

  // What may be left: nothing when etcd refused connections; when it was frozen, gRPC's own attempt
  // to connect (a socket in its shared pool, kept until its connect timeout; the agent's process
  // exits EXIT_DRAIN_MS after its stop whatever lingers, agent/main.ts), but no timer and no call.
  it.each([
    ['unreachable (nothing listens)', () => 'http://127.0.0.1:1', []],
    ['frozen (accepts, never answers)', () => frozenUrl, ['TCPSocketWrap']],
  ])(
    'when etcd was %s while it ran, then once stop() returns nothing of the agent holds the process but %j',
    async (_what, endpoint, allowed) => {
      const before = held();
      const { config } = loadConfig({
        ETCD_AGENT_LISTEN: '127.0.0.1:0',
        ETCD_AGENT_MEMBER_NAME: 'stop-test',
        ETCD_AGENT_ENDPOINTS: endpoint(),
        ETCD_AGENT_LOCAL_ENDPOINT: endpoint(),
      });
      const agent = await startAgent(config, { logger: createLogger({ silent: true }) });
      // Its loops at work (auto-promotion asks for Status once a second: two of its calls sent), and calls in flight.
      const calls = [
        post(agent, '/v1/members/join', { name: 'x', peerURLs: ['http://127.0.0.1:9'], timeoutSeconds: 30 }),
        post(agent, '/v1/maintenance/defragment', {}),
      ];
      await eventually(async () => (await agent.metrics.statusRpcs.get()).values.reduce((sum, v) => sum + v.value, 0) >= 2 || false, {
        within: 15_000,
        every: 50,
      });

      await agent.stop(2000);
      await Promise.allSettled(calls);
      // Sockets and servers being closed are released within a few turns of the event loop (their close
      // callbacks); a retry pause (up to 400 ms) or gRPC's watch of a connecting channel (1 s) would
      // still be there. Turns, not milliseconds: what is counted next does not depend on the machine.
      for (let turn = 0; turn < 10; turn++) await new Promise((resolve) => setImmediate(resolve));

      const left = Object.entries(held()).filter(([kind, n]) => n > (before[kind] ?? 0) && !(allowed as string[]).includes(kind));
      expect(left).toEqual([]);
    },
  );
});
