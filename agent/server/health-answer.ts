/**
 * The bodies of GET /v1/health and /v1/health/local (docs/api.md §4), written straight to the socket
 * by both ways a request reaches them (fast-routes.ts, health-routes.ts). 200 for `healthy`/`degraded`
 * (and a ready local member), else 503 with the same body plus the contract's `error` envelope.
 *
 * Invariant: a cluster answer's text is exactly `JSON.stringify` of the contract's body in its field
 * order; all of it but `requestId` and `ageMs` is serialised once per observation and reused by every
 * request that observation serves (the bodies of a load are the same but for those two).
 */
import type { ServerResponse } from 'node:http';
import type { ClusterHealth } from '../health/types';
import type { ClusterAnswer, LocalAnswer } from '../health/observer';
import { AgentError } from '../proto/errors';

/** An answer ready to write: HTTP status and JSON text. */
export interface HealthText {
  status: number;
  text: string;
}

/** Per observation (by its health object): the status line part and everything after `ageMs`. */
const serialised = new WeakMap<ClusterHealth, { ok: boolean; status: string; rest: string }>();

/** GET /v1/health's answer for `answer`, whose health may carry `expected` (then it is its own object). */
export function clusterHealthText(answer: ClusterAnswer, health: ClusterHealth, requestId: string): HealthText {
  let parts = serialised.get(health);
  if (parts === undefined) {
    const ok = health.status === 'healthy' || health.status === 'degraded';
    const rest = JSON.stringify({
      ...bodyOf(health),
      ...(ok ? {} : { error: unavailable(health.errors[0] ?? `the cluster is ${health.status}`, { status: health.status }) }),
    });
    parts = { ok, status: JSON.stringify(health.status), rest: rest.length > 2 ? `,${rest.slice(1)}` : '}' };
    serialised.set(health, parts);
  }
  const text =
    `{"requestId":${JSON.stringify(requestId)},"status":${parts.status},"observedAt":${JSON.stringify(answer.observedAt)},` +
    `"ageMs":${JSON.stringify(answer.ageMs)}${parts.rest}`;
  return { status: parts.ok ? 200 : 503, text };
}

/** GET /v1/health/local's answer. */
export function localHealthText(answer: LocalAnswer, requestId: string): HealthText {
  const { ready, member } = answer.local;
  const body = {
    requestId,
    ...member,
    observedAt: answer.observedAt,
    ageMs: answer.ageMs,
    ...(ready ? {} : { error: unavailable(member.errors.at(-1) ?? 'the local member is not ready', { member: member.name }) }),
  };
  return { status: ready ? 200 : 503, text: JSON.stringify(body) };
}

/** Writes a health answer; no cache may repeat it, since it is true only now. */
export function writeHealth(res: ServerResponse, answer: HealthText): void {
  res.statusCode = answer.status;
  res.setHeader('Cache-Control', 'no-store');
  writeJsonText(res, answer.text);
}

/** Ends `res` with JSON text, headers as express's `res.json` sets them. */
export function writeJsonText(res: ServerResponse, text: string): void {
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

/** The health body in the contract's field order (after status, observedAt and ageMs). */
function bodyOf(health: ClusterHealth): Omit<ClusterHealth, 'status'> {
  return {
    quorum: health.quorum,
    leader: health.leader,
    members: health.members,
    alarms: health.alarms,
    errors: health.errors,
    ...(health.expected === undefined ? {} : { expected: health.expected }),
    ...(health.operations === undefined ? {} : { operations: health.operations }),
    ...(health.maintenance === undefined ? {} : { maintenance: health.maintenance }),
  };
}

function unavailable(message: string, details: Record<string, unknown>): ReturnType<AgentError['toBody']> {
  return new AgentError('unavailable', message, { details }).toBody();
}
