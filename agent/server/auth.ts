/**
 * Who may change membership (CONTRACT §6): a bearer token from a file that is
 * re-read when it changes (a rotated Kubernetes Secret), else loopback callers
 * only, unless remote unauthenticated calls are explicitly allowed.
 */
import * as fs from 'node:fs';
import { timingSafeEqual, createHash } from 'node:crypto';
import type { RequestHandler } from 'express';
import { AgentError } from '../proto/errors';
import type { Logger } from '../observability/logger';

/** The settings §6 depends on. */
export interface AuthOptions {
  tokenFile?: string;
  allowRemoteUnauthenticated: boolean;
}

/** True for 127.0.0.0/8 and ::1, also in their IPv4-mapped form. */
export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return v4 === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

/** Reads the token file again whenever its identity, size or modification time changes. */
export class TokenSource {
  private cached?: { key: string; digest: Buffer };

  constructor(
    private readonly file: string,
    private readonly logger?: Logger,
  ) {}

  /** SHA-256 of the current token, or undefined when the file cannot be read or is empty. */
  digest(): Buffer | undefined {
    let stat: fs.Stats;
    try {
      stat = fs.statSync(this.file);
    } catch {
      this.logger?.warn('token file unreadable', { file: this.file });
      return undefined;
    }
    const key = `${stat.ino}:${stat.size}:${stat.mtimeMs}`;
    if (this.cached?.key !== key) {
      const token = fs.readFileSync(this.file, 'utf8').replace(/\r?\n$/, '');
      this.cached = { key, digest: token === '' ? Buffer.alloc(0) : sha256(token) };
      this.logger?.info('token file loaded', { file: this.file });
    }
    return this.cached.digest.length === 0 ? undefined : this.cached.digest;
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** Middleware guarding mutating calls; reads pass through untouched. */
export function requireMutationAuth(options: AuthOptions, logger: Logger): RequestHandler {
  const tokens = options.tokenFile === undefined ? undefined : new TokenSource(options.tokenFile, logger);
  return (req, _res, next) => {
    if (req.method !== 'POST') return next();
    if (tokens !== undefined) {
      const expected = tokens.digest();
      const match = /^Bearer (.+)$/.exec(req.get('authorization') ?? '');
      // Comparing digests keeps the comparison constant-time whatever the token lengths.
      if (expected === undefined || match === null || !timingSafeEqual(sha256(match[1]), expected)) {
        return next(new AgentError('unauthorized', 'a valid bearer token is required for this call'));
      }
      return next();
    }
    if (options.allowRemoteUnauthenticated || isLoopback(req.socket.remoteAddress)) return next();
    next(
      new AgentError(
        'forbidden',
        'mutating calls are accepted only from loopback when no ETCD_AGENT_TOKEN_FILE is configured',
      ),
    );
  };
}
