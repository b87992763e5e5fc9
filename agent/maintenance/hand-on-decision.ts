/**
 * Whether a defragmentation call that this agent may not carry out under NOSPACE (it is not the
 * runner, membership/nospace-runner.ts) is handed on to the runner's agent, and what that agent's
 * answer means. Pure.
 *
 * Under NOSPACE no lock can be written, so what keeps two agents from defragmenting at once is that
 * only the runner's agent runs. A call to any other agent is therefore never carried out there: it is
 * handed on, and the runner's answer is this agent's answer, status and body as they came. When it
 * cannot be handed on, the answer is the `busy` refusal naming the runner, with `details.handOn`
 * saying why; never a run here.
 *
 *   handed on already (the header names an agent)   → answer here: a call is handed on once, so two
 *                                                      agents whose member lists differ never loop
 *   no started voter, or it has no peer URL          → answer here
 *   this agent's port was chosen at start (:0)       → answer here: the other agents' port is unknown
 *   otherwise                                        → hand on to `<scheme>://<host of the runner's
 *                                                      peer URL>:<this agent's port>`, as prepare and
 *                                                      recovery reach their peers' agents
 *
 * The runner's answer:
 *
 *   no answer, or not JSON                           → not handed on (why)
 *   401 or 403: it refuses this agent's credentials  → not handed on (why): its refusal is about this
 *                                                      agent, not about the caller's call
 *   404 or 405: its port serves no such route        → not handed on (why): prepare's answer, or not an agent
 *   a defragmentation result, or an agent's error    → this agent's answer, as it came
 */
import type { Member } from '../proto/types';

/** The header a handed-on call carries: the member name of the agent that handed it on. */
export const HANDED_ON_HEADER = 'X-Etcd-Agent-Handed-On-By';

/** What the decision to hand a call on is made from. */
export interface HandOnFacts {
  /** The runner the refusal names; undefined when no voter is started. */
  runner?: Pick<Member, 'name' | 'peerURLs'>;
  /** The agent that handed this call on to this one (the header); undefined for a caller's own call. */
  handedOnBy?: string;
  /** This agent's listen port: every agent of a cluster listens on the same one, each in its own pod. */
  port: number;
  /** This agent serves HTTPS (ETCD_AGENT_TLS_CERT_FILE): so do the others. */
  tls: boolean;
}

/** Hand the call on to `url` (the runner's route), or answer here with the refusal, saying why not. */
export type HandOnDecision = { kind: 'hand-on'; url: string; runner: string } | { kind: 'answer-here'; why: string };

/** Decides whether a refused call is handed on; see the table above. */
export function decideHandOn(f: HandOnFacts): HandOnDecision {
  if (f.handedOnBy !== undefined) {
    const by = f.handedOnBy.slice(0, 64) || 'an agent';
    return { kind: 'answer-here', why: `the call was handed on already (by ${by}), and a call is handed on once` };
  }
  if (f.runner === undefined) return { kind: 'answer-here', why: 'no voter is started, so no agent runs the defragmentation' };
  const peer = f.runner.peerURLs[0];
  if (peer === undefined) return { kind: 'answer-here', why: `${f.runner.name} has no peer URL to find its agent by` };
  if (f.port === 0) {
    return {
      kind: 'answer-here',
      why: "this agent's port was chosen at its start (ETCD_AGENT_LISTEN ends in :0), so the other agents' port is unknown",
    };
  }
  let host: string;
  try {
    // WHATWG keeps the brackets of an IPv6 host, as a URL needs them.
    host = new URL(peer).hostname;
  } catch {
    return { kind: 'answer-here', why: `${f.runner.name}'s peer URL ${peer} is not a URL` };
  }
  if (host === '') return { kind: 'answer-here', why: `${f.runner.name}'s peer URL ${peer} names no host` };
  return { kind: 'hand-on', url: `${f.tls ? 'https' : 'http'}://${host}:${f.port}/v1/maintenance/defragment`, runner: f.runner.name };
}

/** What the runner's agent answered: this agent's answer as it came (with its outcome, for the metrics), or why not. */
export type HandedOnAnswer = { kind: 'relay'; status: number; text: string; outcome: string } | { kind: 'not-handed-on'; why: string };

/** Reads the runner agent's answer; see the table above. */
export function readHandedOnAnswer(runner: string, status: number, text: string): HandedOnAnswer {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { kind: 'not-handed-on', why: `${runner}'s agent answered HTTP ${status}, not with JSON` };
  }
  const answer = body as { action?: unknown; outcome?: unknown; error?: { code?: unknown } };
  const code = typeof answer.error?.code === 'string' ? answer.error.code : undefined;
  const said = code === undefined ? '' : ` ${code}`;
  if (status === 401 || status === 403) {
    return {
      kind: 'not-handed-on',
      why: `${runner}'s agent refused this agent's call (HTTP ${status}${said}); agents hand calls on to each other with ETCD_AGENT_TOKEN_FILE set to the same token on every agent`,
    };
  }
  if (status === 404 || status === 405) {
    return { kind: 'not-handed-on', why: `${runner}'s agent port does not serve POST /v1/maintenance/defragment (HTTP ${status}${said})` };
  }
  if (answer.action === 'defragment' && typeof answer.outcome === 'string') return { kind: 'relay', status, text, outcome: answer.outcome };
  if (code !== undefined) return { kind: 'relay', status, text, outcome: code };
  return { kind: 'not-handed-on', why: `${runner}'s agent answered HTTP ${status} with neither a result nor an error` };
}
