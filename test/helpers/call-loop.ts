/**
 * Calls that keep running against an agent while a test changes the world
 * under it (rotates certificates, restarts etcd): reads (health, members) and
 * membership changes (a learner joined, then made to leave), each answer
 * recorded with its start, end, the phase it started in and, for health, when
 * its observation began.
 *
 * An answer short of the contract's success is excused only by a fact of etcd's
 * own record (helpers/raft-record.ts), never by its text: a health 503 whose
 * observation fell inside an election, a join or leave refused as "unhealthy
 * cluster" inside etcd's guard after a peer connected. `judge` decides that once
 * the loop has stopped and the logs are complete.
 */
import type { RunningAgent } from '../../agent/agent';
import type { Answer } from './http-call';
import { get, post } from './membership';
import { describeElection, meets, type RaftRecord } from './raft-record';

/** One recorded call. */
export interface LoopCall {
  kind: 'health' | 'members' | 'join' | 'leave';
  phase: string;
  start: number;
  end: number;
  status: number;
  /** `outcome`, health `status`, or the error code; `transport` when no answer came. */
  result: string;
  verdict: 'ok' | 'refused' | 'failed';
  message?: string;
  /** Health: when the answer's observation began (epoch ms), when it had one. */
  observedAt?: number;
  /** Why a refusal is excused: the fact of etcd's record it fell inside. */
  excuse?: string;
  /** A `busy` answer's lock holder, as the agent read its record from etcd. */
  holder?: string;
}

/**
 * How an answer counts as it arrives. `ok`: what the contract answers when etcd is reachable
 * (health healthy or degraded, a member list, a join added, a leave removed). `refused`: a
 * retryable 409 of a join or leave (the loop calls again, as a controller does), or any other
 * health answer: either may be excused by etcd's record (`judge`). `failed`: anything else (other
 * 503s, 504, 500, no answer).
 */
export function verdictOf(kind: LoopCall['kind'], answer: Answer): LoopCall['verdict'] {
  const { status, json } = answer;
  if (status === 409 && json?.error?.retryable === true && (kind === 'join' || kind === 'leave')) return 'refused';
  switch (kind) {
    case 'health':
      if (status === 200 && ['healthy', 'degraded'].includes(json?.status)) return 'ok';
      return status === 503 ? 'refused' : 'failed';
    case 'members':
      return status === 200 && Array.isArray(json?.members) ? 'ok' : 'failed';
    case 'join':
      return (status === 202 && json?.outcome === 'added') || (status === 200 && json?.outcome === 'already-member') ? 'ok' : 'failed';
    case 'leave':
      return status === 200 && ['removed', 'already-absent'].includes(json?.outcome) ? 'ok' : 'failed';
  }
}

/**
 * Each refusal kept only where etcd's record explains it, with the fact named in `excuse`; every
 * other refusal becomes `failed`:
 * - a health 503 whose observation (from its `observedAt` to its answer) met an election, a stretch
 *   in which the voters agreed on no leader;
 * - a join or leave etcd refused as unhealthy while it met etcd's guard (the 5 s after a peer
 *   became active);
 * - a join or leave refused as `busy` naming the operation that held the lock (etcd's own record).
 */
export function judge(calls: LoopCall[], raft: RaftRecord): LoopCall[] {
  const elections = raft.elections();
  const guards = raft.guards();
  return calls.map((c) => {
    if (c.verdict !== 'refused') return c;
    let excuse: string | undefined;
    if (c.kind === 'health') {
      const during = elections.find((e) => c.observedAt !== undefined && meets(c.observedAt, c.end, [e]));
      if (during !== undefined) excuse = describeElection(during);
    } else if (c.result === 'unsafe' && /unhealthy/.test(c.message ?? '')) {
      const guard = guards.find((g) => meets(c.start, c.end, [g]));
      if (guard !== undefined)
        excuse = `etcd's guard: ${guard.peer} became active at ${new Date(guard.from).toISOString().slice(11, 23)} (${guard.member}'s log)`;
    } else if (c.result === 'busy' && c.holder !== undefined) {
      excuse = `the lock was held by ${c.holder}`;
    }
    return excuse === undefined ? { ...c, verdict: 'failed' } : { ...c, excuse };
  });
}

/** A member as /v1/health lists it, as far as the loop reads it. */
interface HealthMember {
  name?: string;
  reachable?: boolean;
  errors?: string[];
}

/** The members of a health answer (none when it lists none). */
function healthMembers(answer: Answer): HealthMember[] {
  return Array.isArray(answer.json?.members) ? answer.json.members : [];
}

/** A running loop of calls; `stop()` waits for the calls in flight and answers every call made. */
export class CallLoop {
  readonly calls: LoopCall[] = [];
  phase = 'start';
  private stopped = false;
  private changes = true;
  private readonly workers: Array<Promise<void>> = [];

  constructor(
    private readonly agent: RunningAgent,
    /** A fresh peer URL for learner number `i` (never started: a port nobody listens on). */
    private readonly peerURL: (i: number) => Promise<string>,
  ) {}

  /** Starts `readers` read loops and one membership loop. */
  start(readers = 2): this {
    for (let i = 0; i < readers; i++) this.workers.push(this.reads());
    this.workers.push(this.memberships());
    return this;
  }

  /** Ends the membership loop after its current cycle (the reads go on); resolves once it has ended. */
  async stopChanges(): Promise<void> {
    this.changes = false;
    await this.workers[this.workers.length - 1];
  }

  /** Ends every loop and waits for the calls in flight. */
  async stop(): Promise<LoopCall[]> {
    this.stopped = true;
    this.changes = false;
    await Promise.all(this.workers);
    return this.calls;
  }

  /** Calls that started before `at` and ended after it: in flight at that instant. */
  inFlightAt(at: number): LoopCall[] {
    return this.calls.filter((c) => c.start < at && c.end > at);
  }

  private async reads(): Promise<void> {
    while (!this.stopped) {
      await this.record('health', () => get(this.agent, '/v1/health'));
      await this.record('members', () => get(this.agent, '/v1/members'));
    }
  }

  private async memberships(): Promise<void> {
    for (let i = 0; this.changes && !this.stopped; i++) {
      const member = { name: `rotation-${i}`, peerURLs: [await this.peerURL(i)], timeoutSeconds: 10 };
      // A learner is added, then removed: two membership changes, each under the cluster lock.
      while ((await this.record('join', () => post(this.agent, '/v1/members/join', member))) === 'refused' && !this.stopped)
        await pause(200);
      // The leave is made even once stopping, so no learner is left behind.
      while ((await this.record('leave', () => post(this.agent, '/v1/members/leave', member))) === 'refused') await pause(200);
    }
  }

  private async record(kind: LoopCall['kind'], send: () => Promise<Answer>): Promise<LoopCall['verdict']> {
    const phase = this.phase;
    const start = Date.now();
    let call: LoopCall;
    try {
      const answer = await send();
      const verdict = verdictOf(kind, answer);
      const result = answer.json?.outcome ?? answer.json?.error?.code ?? (kind === 'health' ? answer.json?.status : String(answer.status));
      call = { kind, phase, start, end: Date.now(), status: answer.status, result, verdict };
      if (typeof answer.json?.observedAt === 'string') call.observedAt = Date.parse(answer.json.observedAt);
      const holder = answer.json?.error?.details?.operation;
      if (holder !== undefined) call.holder = `${holder.agent ?? '?'}'s ${holder.action ?? 'operation'} ${holder.id ?? ''}`.trim();
      if (verdict !== 'ok') call.message = answer.json?.error?.message ?? JSON.stringify(answer.json?.errors ?? answer.text).slice(0, 300);
      // For a health answer that was not ok: why each member that did not count was left out, to trace it.
      const left = (verdict === 'ok' ? [] : healthMembers(answer))
        .filter((m) => m.reachable !== true || (m.errors?.length ?? 0) > 0)
        .map((m) => `${m.name ?? '?'}: ${m.errors?.join(', ') || 'unreachable'}`);
      if (left.length > 0) call.message += ` [${left.join('; ').slice(0, 400)}]`;
    } catch (err) {
      call = { kind, phase, start, end: Date.now(), status: 0, result: 'transport', verdict: 'failed', message: String(err) };
    }
    this.calls.push(call);
    return call.verdict;
  }
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
