/**
 * Maintenance.Status of one member, and what its answers teach: the etcd version each endpoint
 * runs (server-version.ts), which the member list read needs to know whether MemberList is
 * linearizable there.
 *
 * Invariant: a Status call goes to the member's own client URL, on a client that authenticates
 * nowhere, and ends within its own timeout. A learner refuses Authenticate ("rpc not supported for
 * learner"), and an Authenticate to a frozen member would hold the call for a whole attempt instead
 * of its timeout. With etcd credentials it carries a token asked of another endpoint
 * (status-token.ts): etcd 3.4.42+, 3.5.28+ and 3.6 refuse Status without one when auth is on.
 */
import type { Etcd3, IStatusResponse } from 'etcd3';
import type { MemberStatus } from '../proto/types';
import type { EtcdConnectionOptions } from './connection-options';
import type { EndpointSet } from './endpoints';
import { etcdRefusal } from './errors';
import { permissionRefusal } from './permission-refusal';
import { ServerVersions } from './server-version';
import { StatusToken } from './status-token';
import { toMemberStatus } from './wire';

/** Longest wait for an endpoint's Status when it is asked only for its version (the member list read). */
const VERSION_ASK_MS = 1000;

/**
 * Called when each Status call has its answer: `ok` with the status (its revision feeds the
 * maintenance run's revision history), or the AgentError code it failed with.
 */
export type StatusListener = (result: string, status?: MemberStatus) => void;

/** Status calls to single members, and the etcd version each endpoint last reported. */
export class MemberStatusCalls {
  /** The etcd version each endpoint reported in its last Status answer (server-version.ts). */
  private readonly versions = new ServerVersions();
  /** The auth token of Status calls, when the agent has etcd credentials (status-token.ts). */
  private readonly statusToken?: StatusToken;

  constructor(
    private readonly options: Pick<EtcdConnectionOptions, 'username' | 'passwordFile'>,
    endpoints: EndpointSet,
    /** The client of one endpoint that sends no etcd credentials of its own. */
    private readonly anonymous: (url: string) => Etcd3,
    attemptTimeoutMs: number,
    private readonly onStatusCall: StatusListener,
  ) {
    if (options.username !== undefined && options.passwordFile !== undefined) {
      this.statusToken = new StatusToken(options.username, options.passwordFile, endpoints, anonymous, attemptTimeoutMs);
    }
  }

  /**
   * The status of the member at `clientURL`, asked there within `timeoutMs` (see the module
   * comment). The version in the answer is remembered for the endpoint (`knownVersion`).
   */
  async ask(clientURL: string, timeoutMs: number): Promise<MemberStatus> {
    const until = Date.now() + timeoutMs;
    let latencyMs = 0;
    const ask = async (): Promise<IStatusResponse> => {
      const credentials = await this.statusToken?.credentials(Math.max(1, until - Date.now()));
      const started = performance.now();
      const res = await this.anonymous(clientURL).maintenance.status({
        deadline: new Date(until),
        ...(credentials === undefined ? {} : { credentials }),
      });
      latencyMs = Math.round((performance.now() - started) * 100) / 100;
      return res;
    };
    try {
      let res: IStatusResponse;
      try {
        res = await ask();
      } catch (err) {
        // A token this member no longer knows (its TTL passed there), or none while auth is on: once more with a new one.
        const refusal = etcdRefusal(err);
        if (this.statusToken === undefined || (refusal !== 'invalid-token' && refusal !== 'user-required') || Date.now() >= until)
          throw err;
        this.statusToken.renew();
        res = await ask();
      }
      this.versions.learn(clientURL, res.version);
      const status = toMemberStatus(res, latencyMs);
      this.onStatusCall('ok', status);
      return status;
    } catch (err) {
      const error = permissionRefusal(err, 'status', this.options.username);
      this.onStatusCall(error.code);
      throw error;
    }
  }

  /** The etcd version `clientURL` reported in its last Status answer, if it answered one. */
  knownVersion(clientURL: string): string | undefined {
    return this.versions.of(clientURL);
  }

  /**
   * The version `url` runs, asked now (a Status call, within half of what is left before `at` and at
   * most `VERSION_ASK_MS`); undefined when it does not say. The answer is remembered for the next
   * read (Status answers are); an endpoint that did not answer is not asked again for 10 s
   * (server-version.ts).
   */
  async askVersion(url: string, at: Date): Promise<string | undefined> {
    if (!this.versions.worthAsking(url)) return undefined;
    try {
      return (await this.ask(url, Math.max(1, Math.min(VERSION_ASK_MS, (at.getTime() - Date.now()) / 2)))).version;
    } catch {
      // The read itself will say what is wrong with this endpoint.
      this.versions.askFailed(url);
      return undefined;
    }
  }
}
