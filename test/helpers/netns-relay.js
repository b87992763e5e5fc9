// A caller's end inside a network namespace, for a test process outside it: listens on a Unix socket
// (a path, which every network namespace sees) and, for each connection, reads one line naming where
// to go, then pipes the rest both ways to that TCP address, from inside the namespace it runs in.
//   node netns-relay.js <socket path>        (started with `ip netns exec <ns> node …`)
// The line is `CONNECT <host>:<port>` or `DROP-REPLY <host>:<port>`; with the latter the request goes
// through but the answer is thrown away and the caller's connection closed when it arrives: a reply lost
// on its way back, after the server did the work. Prints `ready` once listening.
'use strict';
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a plain script node runs as is
const net = require('node:net');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a plain script node runs as is
const fs = require('node:fs');
const { Buffer } = globalThis;

const socketPath = process.argv[2];
fs.rmSync(socketPath, { force: true });

const server = net.createServer((client) => {
  let head = Buffer.alloc(0);
  const onData = (chunk) => {
    head = Buffer.concat([head, chunk]);
    const nl = head.indexOf('\n');
    if (nl === -1) return;
    client.removeListener('data', onData);
    const match = /^(CONNECT|DROP-REPLY) ([^\s:]+):(\d+)$/.exec(head.subarray(0, nl).toString('latin1').trim());
    if (match === null) {
      client.destroy();
      return;
    }
    const upstream = net.connect({ host: match[2], port: Number(match[3]) });
    const rest = head.subarray(nl + 1);
    if (rest.length > 0) upstream.write(rest);
    client.pipe(upstream);
    if (match[1] === 'CONNECT') {
      upstream.pipe(client);
    } else {
      upstream.once('data', () => {
        upstream.destroy();
        client.destroy();
      });
    }
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    upstream.on('error', close).on('close', close);
    client.on('error', close).on('close', close);
  };
  client.on('data', onData);
  client.on('error', () => client.destroy());
});
server.listen(socketPath, () => process.stdout.write('ready\n'));
