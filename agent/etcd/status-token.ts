/**
 * The etcd auth token that Status calls carry when the agent has etcd credentials.
 *
 * Why a token of its own: with auth on, etcd 3.4.42+, 3.5.28+ and 3.6.9+ refuse a Status call that
 * carries none ("etcdserver: user name is empty"; the CVE-2026-33413 fix, 3.6.0 already for Status),
 * while 3.4.23 and earlier patches check nothing. etcd3 gets its token by an Authenticate call to the
 * very endpoint it then calls, and a learner refuses Authenticate ("rpc not supported for learner"),
 * so a learner's Status would always fail. The token is therefore asked of any endpoint that grants
 * one (a voter) and sent to whichever member the Status call asks: every member knows it, a learner
 * too (a simple token is assigned through the raft log, a JWT is signed).
 *
 * Invariant: one token request at a time, shared by every Status call; a call waits for it at most
 * its own timeout, the request itself has its own (an attempt). A member that answers "invalid auth
 * token" (a simple token unused there for --auth-token-ttl, 300 s by default) or "user name is empty"
 * makes the next call ask for a new one.
 */
import * as fs from 'node:fs';
import type { CallCredentials } from '@grpc/grpc-js';
import type { Etcd3 } from 'etcd3';
import { Deadline } from '../lib/deadline';
import { etcd3 } from './etcd3-module';
import type { EndpointSet } from './endpoints';

/** What etcd answers an Authenticate with while its authentication is off. */
const AUTH_NOT_ENABLED = 'authentication is not enabled';

/** Credentials for Status calls: the token as per-call gRPC credentials, or none while etcd has auth off. */
export class StatusToken {
  private pending?: Promise<CallCredentials | undefined>;

  constructor(
    private readonly username: string,
    private readonly passwordFile: string,
    private readonly endpoints: EndpointSet,
    /** The client of one endpoint that sends no credentials of its own. */
    private readonly anonymous: (url: string) => Etcd3,
    private readonly attemptMs: number,
  ) {}

  /**
   * The credentials a Status call sends (undefined while etcd has auth off), waiting at most
   * `timeoutMs` for a token being asked for; rejects when none could be had in that time.
   */
  credentials(timeoutMs: number): Promise<CallCredentials | undefined> {
    this.pending ??= this.fetch();
    const pending = this.pending;
    // A failed request is forgotten at once: the next call asks again.
    pending.catch(() => {
      if (this.pending === pending) this.pending = undefined;
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no etcd auth token within ${timeoutMs} ms`)), timeoutMs);
    });
    return Promise.race([pending, late]).finally(() => clearTimeout(timer));
  }

  /** A Status call found the token invalid (or missing while auth is on): the next call asks for a new one. */
  renew(): void {
    this.pending = undefined;
  }

  /** Asks the endpoints, a further one joining every 200 ms without an answer, for a token. */
  private async fetch(): Promise<CallCredentials | undefined> {
    const password = fs.readFileSync(this.passwordFile, 'utf8').replace(/\r?\n$/, '');
    const deadline = Deadline.in(this.attemptMs * 2);
    try {
      const { token } = await this.endpoints.hedged(deadline, this.attemptMs, (_client, at, url) =>
        this.anonymous(url).auth.authenticate({ name: this.username, password }, { deadline: at }),
      );
      return tokenCredentials(token);
    } catch (err) {
      if (err instanceof Error && err.message.includes(AUTH_NOT_ENABLED)) return undefined;
      throw err;
    }
  }
}

/** `token` as per-call gRPC credentials: the `token` metadata entry etcd reads. */
function tokenCredentials(token: string): CallCredentials {
  const { grpcCredentials, GrpcMetadata } = etcd3();
  return grpcCredentials.createFromMetadataGenerator((_params, done) => {
    const metadata = new GrpcMetadata();
    metadata.set('token', token);
    done(null, metadata);
  });
}
