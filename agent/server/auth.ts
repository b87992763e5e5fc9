/**
 * Who may change membership (docs/api.md §6): a bearer token from a file that is
 * re-read when it changes (a rotated Kubernetes Secret), else loopback callers
 * only, unless remote unauthenticated calls are explicitly allowed.
 *
 * In the node's network namespace (`host-network.ts`) the loopback is the node's,
 * shared by every process and host-network pod there, so it vouches for nobody:
 * a mutating call then needs the token from loopback too, and the agent does not
 * start without one, unless the operator accepts exactly that with
 * ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK=true.
 */
import * as fs from 'node:fs';
import { timingSafeEqual, createHash } from 'node:crypto';
import type { RequestHandler } from 'express';
import { AgentError } from '../proto/errors';
import type { Logger } from '../observability/logger';
import { fileIdentity } from '../config/watched-files';

/** The settings §6 depends on. */
export interface AuthOptions {
  tokenFile?: string;
  allowRemoteUnauthenticated: boolean;
  /** The agent shares the node's network namespace, hence its loopback (absent: false). */
  hostNetwork?: boolean;
  /** In the node's network namespace, loopback callers need no token all the same (absent: false). */
  hostNetworkAllowUnauthenticatedLoopback?: boolean;
}

/** True for 127.0.0.0/8 and ::1, also in their IPv4-mapped form. */
export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false;
  const v4 = address.toLowerCase().startsWith('::ffff:') ? address.slice(7) : address;
  return v4 === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

/** Reads the token file again whenever its identity, size or times change (following symlinks, as a Secret swap needs). */
export class TokenSource {
  private cached?: { key: string; digest?: Buffer };
  private unreadable = false;

  constructor(
    private readonly file: string,
    private readonly logger?: Logger,
  ) {}

  /** SHA-256 of the current token, or undefined when the file cannot be read or is empty (then nothing is accepted). */
  digest(): Buffer | undefined {
    let key: string;
    let token: string;
    try {
      key = fileIdentity(this.file);
      if (this.cached?.key === key) return this.cached.digest;
      token = fs.readFileSync(this.file, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      // Mid-rotation the path can vanish for an instant; refuse until it is back, and say so once.
      if (!this.unreadable) {
        this.unreadable = true;
        this.logger?.warn('token file unreadable; refusing mutating calls until it is back', {
          file: this.file,
          error: (err as NodeJS.ErrnoException).code ?? 'unknown',
        });
      }
      this.cached = undefined;
      return undefined;
    }
    this.unreadable = false;
    this.cached = { key, digest: token === '' ? undefined : sha256(token) };
    if (token === '') this.logger?.warn('token file is empty; refusing mutating calls', { file: this.file });
    else this.logger?.info('token file loaded', { file: this.file });
    return this.cached.digest;
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** What §6 looks at for one mutating call. */
export interface MutationCaller {
  /** The `Authorization` header as received. */
  authorization?: string;
  /** The peer address of the TCP connection (never a forwarded header). */
  remoteAddress?: string;
}

/** What §6 is configured with at the moment of the call. */
export interface MutationPolicy {
  /** True when ETCD_AGENT_TOKEN_FILE is set, even if the file is unreadable now. */
  tokenConfigured: boolean;
  /** SHA-256 of the current token; undefined when the file is unreadable or empty. */
  tokenDigest?: Buffer;
  allowRemoteUnauthenticated: boolean;
  /** The agent shares the node's network namespace (absent: false). */
  hostNetwork?: boolean;
  /** In the node's network namespace, loopback callers need no token all the same (absent: false). */
  hostNetworkAllowUnauthenticatedLoopback?: boolean;
}

/**
 * The §6 rule as a pure function: undefined when the call is allowed, else the
 * 401 or 403 to answer. A configured token is required, also from loopback;
 * `ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED=true` accepts every call, as §6
 * lists it as an alternative of its own (start-up warns when both are set).
 * Without a token, loopback callers are accepted only where the loopback is the
 * pod's own: not in the node's network namespace, unless explicitly allowed.
 */
export function authorizeMutation(policy: MutationPolicy, caller: MutationCaller): AgentError | undefined {
  if (policy.allowRemoteUnauthenticated) return undefined;
  if (policy.tokenConfigured) {
    const match = /^Bearer +(.+)$/i.exec(caller.authorization ?? '');
    // Comparing digests keeps the comparison constant-time whatever the token lengths.
    if (policy.tokenDigest === undefined || match === null || !timingSafeEqual(sha256(match[1]), policy.tokenDigest)) {
      return new AgentError('unauthorized', 'a valid bearer token is required for this call');
    }
    return undefined;
  }
  const loopbackIsPrivate = policy.hostNetwork !== true || policy.hostNetworkAllowUnauthenticatedLoopback === true;
  if (isLoopback(caller.remoteAddress) && loopbackIsPrivate) return undefined;
  if (!loopbackIsPrivate) {
    // Start-up refuses this configuration; an app built without that check still fails closed.
    return new AgentError(
      'forbidden',
      "mutating calls need ETCD_AGENT_TOKEN_FILE in the node's network namespace, where loopback callers are any process on the node",
    );
  }
  return new AgentError('forbidden', 'mutating calls are accepted only from loopback when no ETCD_AGENT_TOKEN_FILE is configured');
}

/**
 * The warnings a start logs for these settings (pure): a token that the remote opt-out makes
 * optional, and, in the node's network namespace, loopback callers accepted without one. Logged
 * by createAgent at start, not by `requireMutationAuth`: the express app it guards is built only by
 * the first request that needs it (agent.ts).
 */
export function mutationAuthWarnings(options: AuthOptions): string[] {
  const warnings: string[] = [];
  const tokenConfigured = options.tokenFile !== undefined;
  if (tokenConfigured && options.allowRemoteUnauthenticated) {
    warnings.push(
      'ETCD_AGENT_ALLOW_REMOTE_UNAUTHENTICATED=true: mutating calls are accepted without the token of ETCD_AGENT_TOKEN_FILE too',
    );
  }
  if (options.hostNetwork === true && !tokenConfigured && options.hostNetworkAllowUnauthenticatedLoopback === true) {
    warnings.push(
      "ETCD_AGENT_HOST_NETWORK_ALLOW_UNAUTHENTICATED_LOOPBACK=true: in the node's network namespace any process on the node may change membership",
    );
  }
  return warnings;
}

/** Middleware guarding mutating calls (every POST); reads pass through untouched. Start-up's warnings: `mutationAuthWarnings`. */
export function requireMutationAuth(options: AuthOptions, logger: Logger): RequestHandler {
  const tokens = options.tokenFile === undefined ? undefined : new TokenSource(options.tokenFile, logger);
  return (req, res, next) => {
    if (req.method !== 'POST') return next();
    const refusal = authorizeMutation(
      {
        tokenConfigured: tokens !== undefined,
        tokenDigest: tokens?.digest(),
        allowRemoteUnauthenticated: options.allowRemoteUnauthenticated,
        hostNetwork: options.hostNetwork,
        hostNetworkAllowUnauthenticatedLoopback: options.hostNetworkAllowUnauthenticatedLoopback,
      },
      { authorization: req.get('authorization'), remoteAddress: req.socket.remoteAddress },
    );
    if (refusal?.code === 'unauthorized') res.setHeader('WWW-Authenticate', 'Bearer');
    next(refusal);
  };
}
