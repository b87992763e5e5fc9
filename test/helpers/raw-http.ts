/**
 * Raw HTTP/1.1 over a TCP socket, for requests no well-behaved client sends:
 * broken framing, bad header bytes, bodies that trickle or stall.
 */
import net from 'node:net';

/** A piece of a raw request: bytes to write, or a pause before the next piece. */
export type RawPiece = string | Buffer | { pauseMs: number };

/** What came back: the first response (if any) and whether the server closed without one. */
export interface RawAnswer {
  status?: number;
  headers: Record<string, string>;
  body: string;
  // The body is whatever the server sent; tests look into it field by field.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json?: any;
  /** True when the connection ended (or the wait ran out) before a full response arrived. */
  noAnswer: boolean;
  elapsedMs: number;
  /** When it ended (epoch ms): answered, closed or given up on. */
  endedAt: number;
}

/** What a caller may be told while a request goes: `written` once the first piece is handed to the kernel. */
export interface RawEvents {
  written?: () => void;
}

/** Sends `pieces` to `host:port` and waits (up to `timeoutMs`) for the server to answer and close. */
export function rawRequest(host: string, port: number, pieces: RawPiece[], timeoutMs = 10_000, events: RawEvents = {}): Promise<RawAnswer> {
  return rawRequestAt({ host, port }, pieces, timeoutMs, events);
}

/** As `rawRequest`, to any address `net.connect` takes (a Unix socket's `path`, say). */
export function rawRequestAt(to: net.NetConnectOpts, pieces: RawPiece[], timeoutMs = 10_000, events: RawEvents = {}): Promise<RawAnswer> {
  const started = Date.now();
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const pauses = new Set<NodeJS.Timeout>();
    let done = false;
    const socket = net.connect(to);
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      for (const pause of pauses) clearTimeout(pause);
      socket.destroy();
      const endedAt = Date.now();
      resolve({ ...parseResponse(Buffer.concat(chunks)), elapsedMs: endedAt - started, endedAt });
    };
    const timer = setTimeout(finish, timeoutMs);
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      if (parseResponse(Buffer.concat(chunks)).noAnswer === false) finish();
    });
    socket.on('end', finish);
    socket.on('close', finish);
    socket.on('error', finish);
    socket.on('connect', async () => {
      let first = true;
      for (const piece of pieces) {
        if (done || socket.destroyed) return;
        if (typeof piece === 'object' && !Buffer.isBuffer(piece)) {
          await new Promise<void>((r) => {
            const pause = setTimeout(() => {
              pauses.delete(pause);
              r();
            }, piece.pauseMs);
            pauses.add(pause);
          });
        } else {
          socket.write(piece, first ? () => events.written?.() : undefined);
          first = false;
        }
      }
    });
  });
}

function parseResponse(all: Buffer): Omit<RawAnswer, 'elapsedMs' | 'endedAt'> {
  // Interim answers (100 Continue) come before the real one; skip them.
  let raw = all;
  while (/^HTTP\/1\.[01] 1\d\d /.test(raw.toString('latin1', 0, 13))) {
    const end = raw.indexOf('\r\n\r\n');
    if (end === -1) return { headers: {}, body: '', noAnswer: true };
    raw = raw.subarray(end + 4);
  }
  const text = raw.toString('latin1');
  const headEnd = text.indexOf('\r\n\r\n');
  if (headEnd === -1) return { headers: {}, body: '', noAnswer: true };
  const [statusLine, ...lines] = text.slice(0, headEnd).split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1];
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const rest = raw.subarray(Buffer.byteLength(text.slice(0, headEnd + 4), 'latin1'));
  let body: Buffer | undefined;
  if (headers['transfer-encoding']?.toLowerCase() === 'chunked') {
    body = dechunk(rest);
  } else if (headers['content-length'] !== undefined) {
    const length = Number(headers['content-length']);
    body = rest.length >= length ? rest.subarray(0, length) : undefined;
  } else {
    body = rest;
  }
  if (status === undefined || body === undefined) return { headers, body: '', noAnswer: true };
  const bodyText = body.toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(bodyText);
  } catch {
    json = undefined;
  }
  return { status: Number(status), headers, body: bodyText, json, noAnswer: false };
}

/** Decodes a complete chunked body; undefined while the last chunk has not arrived. */
function dechunk(raw: Buffer): Buffer | undefined {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = raw.indexOf('\r\n', at);
    if (lineEnd === -1) return undefined;
    const size = parseInt(raw.subarray(at, lineEnd).toString('latin1'), 16);
    if (Number.isNaN(size)) return undefined;
    if (size === 0) return Buffer.concat(parts);
    if (raw.length < lineEnd + 2 + size + 2) return undefined;
    parts.push(raw.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}
