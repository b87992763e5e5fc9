/**
 * Listening and stopping: the HTTP(S) server of an app, and a shutdown that
 * stops accepting, lets in-flight calls finish for a grace period, then cuts them.
 */
import { randomUUID } from 'node:crypto';
import * as http from 'node:http';
import * as https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { RequestListener } from 'node:http';
import type { Config } from '../config/config';
import type { Logger } from '../observability/logger';
import { httpsServerOptions, tlsFilesOf, TlsReloader } from './tls';
import {
  CLOSE_GRACE_MS,
  CONNECTIONS_CHECK_INTERVAL_MS,
  HEADERS_TIMEOUT_MS,
  KEEP_ALIVE_TIMEOUT_MS,
  REQUEST_TIMEOUT_MS,
} from '../config/timings';

/** A listening server and how to stop it. */
export interface Listening {
  server: http.Server | https.Server;
  /** Base URL for clients, e.g. http://127.0.0.1:3501 (https:// when TLS is configured). */
  url: string;
  port: number;
  /** Stops accepting; waits up to `graceMs` for in-flight requests, then closes every connection. */
  close(graceMs?: number): Promise<void>;
}

/** Options of `listen` beyond the configuration. */
export interface ListenOptions {
  logger?: Logger;
  /** How often the TLS files are checked for a rotation; default 1 s. */
  tlsReloadIntervalMs?: number;
  /** The longest a client may take to send one whole request (headers and body); default 15 s. */
  requestTimeoutMs?: number;
}

/** What `listen` reads from the configuration. */
export type ListenConfig = Pick<Config, 'listen'> & Partial<Pick<Config, 'tlsCertFile' | 'tlsKeyFile' | 'tlsClientCaFile'>>;

/** Starts the HTTP server of `app` (HTTPS when TLS files are configured) on the configured address. */
export async function listen(app: RequestListener, config: ListenConfig, options: ListenOptions = {}): Promise<Listening> {
  const requestTimeout = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  const serverOptions: http.ServerOptions = {
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    // Checked by `requireHost` instead, so the refusal carries the contract's envelope.
    requireHostHeader: false,
    // A 64 KiB body arrives in well under these; a slow sender cannot hold a connection for minutes.
    headersTimeout: Math.min(HEADERS_TIMEOUT_MS, requestTimeout),
    requestTimeout,
    connectionsCheckingInterval: Math.min(CONNECTIONS_CHECK_INTERVAL_MS, requestTimeout),
  };
  const files = tlsFilesOf(config);
  const handler = requireHost(app);
  const server =
    files === undefined
      ? http.createServer(serverOptions, handler)
      : https.createServer({ ...serverOptions, ...httpsServerOptions(files) }, handler);
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => answerClientError(err, socket, options.logger));
  // Node answers an unknown Expect with a bare 417; answer it as every other refusal instead.
  server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) =>
    refuse(res, `the Expect header ${JSON.stringify(String(req.headers.expect).slice(0, 64))} is not supported`),
  );
  let reloader: TlsReloader | undefined;
  if (files !== undefined) {
    const secure = server as https.Server;
    reloader = new TlsReloader(files, (context) => secure.setSecureContext(context), options.logger, options.tlsReloadIntervalMs);
    secure.on('tlsClientError', (err: NodeJS.ErrnoException, socket) =>
      options.logger?.debug('tls handshake refused', { remote: socket.remoteAddress, error: err.code ?? err.message }),
    );
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.listen.port, config.listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  reloader?.start();
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const clientHost = host === '0.0.0.0' ? '127.0.0.1' : host === '[::]' ? '[::1]' : host;
  return {
    server,
    url: `${files === undefined ? 'http' : 'https'}://${clientHost}:${address.port}`,
    port: address.port,
    close: (graceMs = CLOSE_GRACE_MS) => {
      reloader?.stop();
      return closeServer(server, graceMs);
    },
  };
}

/** HTTP/1.1 requires a Host header (RFC 9112 §3.2); a request without one gets the contract's 400. */
function requireHost(app: RequestListener): RequestListener {
  return (req, res) => {
    if (req.httpVersion === '1.1' && req.headers.host === undefined) {
      refuse(res, 'an HTTP/1.1 request needs a Host header');
      return;
    }
    app(req, res);
  };
}

/** A 400 `bad-request` answered outside Express (no route has seen the request), closing the connection. */
function refuse(res: http.ServerResponse, message: string): void {
  const requestId = randomUUID();
  res.shouldKeepAlive = false;
  res.writeHead(400, { 'Content-Type': 'application/json; charset=utf-8', 'X-Request-Id': requestId, Connection: 'close' });
  res.end(JSON.stringify({ requestId, error: { code: 'bad-request', message, retryable: false } }));
}

/**
 * Answers a request Node could not parse or did not receive in time with the
 * contract's envelope (Node's default is a bare status line), then closes.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Socket, logger?: Logger): void {
  const response = (socket as Socket & { _httpMessage?: http.ServerResponse })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || response?.headersSent === true) {
    socket.destroy();
    return;
  }
  const message =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? 'the request headers are too large'
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'the request was not received in time'
        : 'the request is not valid HTTP/1.1';
  const requestId = randomUUID();
  const body = JSON.stringify({ requestId, error: { code: 'bad-request', message, retryable: false } });
  logger?.http('request', { requestId, status: 400, error: err.code ?? 'clientError', remote: socket.remoteAddress });
  socket.end(
    `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
  );
}

function closeServer(server: http.Server | https.Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => server.closeAllConnections(), graceMs);
    timer.unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}
