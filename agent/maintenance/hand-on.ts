/**
 * Hands a defragmentation call on to the NOSPACE runner's agent, as hand-on-decision.ts decides: the
 * same request with the time the call has left, this call's request id (so both agents log the one
 * id and the answer carries it), the header that stops a second hand-on, and credentials the runner's
 * agent accepts from another pod (docs/api.md §6): this agent's own token, else the caller's
 * `Authorization` as it came. Over HTTPS it trusts ETCD_AGENT_TLS_CLIENT_CA_FILE (else Node's CAs)
 * and shows this agent's own certificate, for an agent that asks for one.
 */
import * as fs from 'node:fs';
import type { Config } from '../config/config';
import type { Deadline } from '../lib/deadline';
import { request, tlsFromFiles } from '../lib/http-request';
import type { Logger } from '../observability/logger';
import type { DefragmentRequest } from '../proto/requests';
import type { NotTheRunner } from './defrag-right';
import { decideHandOn, HANDED_ON_HEADER, readHandedOnAnswer, type HandedOnAnswer } from './hand-on-decision';

/** What a caller's call brings that a hand-on needs. */
export interface HandOnCall {
  /** The agent that handed this call on already (the header), if one did. */
  handedOnBy?: string;
  /** The caller's `Authorization` header. */
  authorization?: string;
  requestId?: string;
}

/** What a hand-on needs of the agent. */
export interface HandOnDeps {
  config: Pick<Config, 'memberName' | 'listen' | 'tokenFile' | 'tlsCertFile' | 'tlsKeyFile' | 'tlsClientCaFile'>;
  logger: Logger;
}

/** Time past the runner's own deadline for its answer to come back: the caller waits longer still (the CLI 5 s). */
const ANSWER_MARGIN_MS = 2000;

/** Hands the refused call on, or says why not; the runner's answer comes back as it came. */
export async function handOn(
  refusal: NotTheRunner,
  req: DefragmentRequest,
  call: HandOnCall,
  deadline: Deadline,
  deps: HandOnDeps,
): Promise<HandedOnAnswer> {
  const { config, logger } = deps;
  const decision = decideHandOn({
    runner: refusal.runner,
    handedOnBy: call.handedOnBy,
    port: config.listen.port,
    tls: config.tlsCertFile !== undefined,
  });
  if (decision.kind === 'answer-here') return { kind: 'not-handed-on', why: decision.why };
  // The runner answers within its deadline: what is left of this call's, whole seconds, at least 1.
  const timeoutSeconds = Math.max(1, Math.floor(deadline.remainingMs() / 1000));
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    Accept: 'application/json',
    [HANDED_ON_HEADER]: config.memberName,
  };
  if (call.requestId !== undefined && call.requestId !== '') headers['X-Request-Id'] = call.requestId;
  const authorization = ownToken(config.tokenFile) ?? call.authorization;
  if (authorization !== undefined) headers.Authorization = authorization;
  let answer: HandedOnAnswer;
  try {
    const res = await request(decision.url, {
      method: 'POST',
      headers,
      payload: JSON.stringify({ ...req, timeoutSeconds }),
      timeoutMs: timeoutSeconds * 1000 + ANSWER_MARGIN_MS,
      tls: tlsFromFiles(decision.url, { caFile: config.tlsClientCaFile, certFile: config.tlsCertFile, keyFile: config.tlsKeyFile }),
      maxBytes: 1 << 20,
    });
    answer = readHandedOnAnswer(decision.runner, res.status, res.text);
  } catch (err) {
    answer = {
      kind: 'not-handed-on',
      why: `${decision.runner}'s agent at ${decision.url} did not answer: ${err instanceof Error ? err.message : String(err)}`,
    };
  }
  if (answer.kind === 'relay') {
    logger.info('handed the defragmentation call on to the NOSPACE runner', {
      runner: decision.runner,
      url: decision.url,
      status: answer.status,
      outcome: answer.outcome,
      requestId: call.requestId,
    });
  } else {
    logger.warn('could not hand the defragmentation call on to the NOSPACE runner', {
      runner: decision.runner,
      why: answer.why,
      requestId: call.requestId,
    });
  }
  return answer;
}

/** `Bearer <this agent's token>`, or undefined without a readable, non-empty token file. */
function ownToken(file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  try {
    const token = fs.readFileSync(file, 'utf8').replace(/\r?\n$/, '');
    return token === '' ? undefined : `Bearer ${token}`;
  } catch {
    return undefined;
  }
}
