/**
 * The real kbagent in front of the agent, end to end against real etcd, with etcd TLS off: the stories
 * are in test/helpers/kbagent-e2e.ts (kbagent-e2e-tls.test.ts runs them with TLS on, side by side).
 * And one check of test/helpers/go-wire.ts against Go itself: the request kbagent's Go HTTP client
 * writes is byte for byte the one goHttpRequest rebuilds (the controller's client is the same net/http).
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import { freePorts } from '../../scripts/ports';
import { describeKbAgentEndToEnd } from '../helpers/kbagent-e2e';
import { goActionRequestJson, goHttpRequest } from '../helpers/go-wire';
import { kbAgentBinary } from '../helpers/kbagent-process';
import { rawRequest } from '../helpers/raw-http';
import { eventually, patience } from '../helpers/eventually';

describeKbAgentEndToEnd(false);

describe("Go's HTTP client, as kbagent runs it", () => {
  it(
    'when kbagent sends an HTTP action with a header and a rendered body, then its bytes are what goHttpRequest writes',
    async () => {
      const kb = await kbAgentBinary();
      const [port, streaming, capture] = await freePorts(3, '127.0.0.1');
      const received: Buffer[] = [];
      const server = net.createServer((socket) => {
        socket.on('data', (chunk: Buffer) => {
          received.push(chunk);
          if (Buffer.concat(received).includes('\r\n\r\n{"to": "etcd-1"}')) socket.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
        });
      });
      await new Promise<void>((resolve) => server.listen(capture, '127.0.0.1', resolve));
      const action = {
        name: 'a',
        http: {
          port: String(capture),
          path: '/v1/x',
          method: 'POST',
          body: '{"to": "{{ .TO }}"}',
          headers: [{ name: 'content-type', value: 'application/json' }],
        },
      };
      const child = spawn(kb.path, ['--address', '127.0.0.1', '--port', String(port), '--streaming-port', String(streaming)], {
        env: { HOME: '/nonexistent', PATH: process.env.PATH, KB_AGENT_ACTION: JSON.stringify([action]) },
        stdio: 'ignore',
      });
      try {
        const call = goHttpRequest(
          'POST',
          '127.0.0.1',
          port,
          '/v1.0/action',
          [],
          goActionRequestJson({ action: 'a', parameters: { TO: 'etcd-1' } }),
        );
        // Asked again until kbagent listens (its process has just started).
        const answer = await eventually(
          async () => {
            const a = await rawRequest('127.0.0.1', port, [call], 5000);
            if (a.noAnswer) throw new Error('kbagent does not answer yet');
            return a;
          },
          { within: 10_000, every: 100 },
        );

        expect(answer.json).toEqual({ output: Buffer.from('ok').toString('base64') });
        expect(Buffer.concat(received).toString('latin1')).toBe(
          goHttpRequest(
            'POST',
            '127.0.0.1',
            capture,
            '/v1/x',
            [{ name: 'content-type', value: 'application/json' }],
            '{"to": "etcd-1"}',
          ).toString('latin1'),
        );
      } finally {
        child.kill('SIGKILL');
        await new Promise((resolve) => server.close(resolve));
      }
    },
    patience(60_000),
  );
});
