/**
 * The quorum gate's choice of evidence, with a scripted cluster client: when an observation's
 * `no quorum` is taken at once, and when the gate asks the voters itself before it answers
 * `unavailable`. Each case waits for events (the call's own answer, the Status calls the gate
 * makes), never for a time; what real etcd answers is test/integration/membership-quorum.test.ts.
 */
import { Deadline } from '../../agent/lib/deadline';
import { QuorumGate, type ObservedVoters } from '../../agent/membership/quorum-gate';
import { isNoQuorum } from '../../agent/membership/quorum-verdict';
import { createLogger } from '../../agent/observability/logger';
import type { MemberList, MemberStatus } from '../../agent/proto/types';
import { list, member, memberStatus } from '../helpers/membership-fixtures';
import { captureLogs } from '../helpers/log-capture';

const cluster3 = list(member('a'), member('b'), member('c'));
const members = cluster3.members;

/** A promise and the function that resolves it. */
function signal<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * A gate over a scripted cluster of 3 voters: `down` lists the members whose Status call is refused
 * (a killed member); every Status call is recorded, and `statusAsked` resolves once all 3 were asked.
 */
function gateOver(observed: ObservedVoters | undefined, down: Set<string> = new Set()) {
  const asked: string[] = [];
  const allAsked = signal();
  const { stream, text } = captureLogs();
  const gate = new QuorumGate({
    cluster: {
      localMemberList: async (): Promise<MemberList> => cluster3,
      memberStatus: async (url: string): Promise<MemberStatus> => {
        asked.push(url);
        if (new Set(asked).size === members.length) allAsked.resolve();
        if (down.has(url)) throw new Error('14 UNAVAILABLE: No connection established. Last error: connect ECONNREFUSED');
        return memberStatus(members.find((m) => m.clientURLs[0] === url)?.id ?? '?');
      },
    },
    config: { statusTimeoutMs: 500 },
    observed: () => observed,
    logger: createLogger({ level: 'warn', stream }),
  });
  return { gate, asked, statusAsked: allAsked.promise, logs: text };
}

/**
 * An observation begun just now in which the first `answering` of the 3 voters answered; of the
 * silent ones, the first `outOfTime` ran out of time and the rest refused.
 */
function observation(answering: number, outOfTime: number): ObservedVoters {
  const silent = members.slice(answering).map((m, i) => ({
    member: m.name,
    error: i < outOfTime ? `${m.clientURLs[0]}: no answer within 500 ms` : `${m.clientURLs[0]}: etcd is unreachable`,
  }));
  return { evidence: { voters: 3, answering, outOfTime, leader: answering >= 2 }, startedAt: performance.now(), silent };
}

describe('the quorum gate', () => {
  it('when the fresh observation found 2 of 3 voters silent only because their time ran out, then the gate asks them itself and the call goes on to its answer', async () => {
    const { gate, asked, statusAsked, logs } = gateOver(observation(1, 2));
    const answered = signal<string>();
    // The call answers once the gate has asked every voter: had it taken the observation's word, it
    // would have refused before any Status call.
    void statusAsked.then(() => answered.resolve('the member list'));

    const result = await gate.through(Deadline.in(10_000), 'reading the member list', () => answered.promise);

    expect(result).toBe('the member list');
    expect(new Set(asked)).toEqual(new Set(members.map((m) => m.clientURLs[0])));
    expect(logs()).not.toContain('no quorum');
  });

  it('when the fresh observation found 2 of 3 voters refusing (killed), then the call answers unavailable at once, with no Status call, and one warn line names the silent voters', async () => {
    const { gate, asked, logs } = gateOver(observation(1, 0));
    const never = new Promise<string>(() => undefined);

    const refusal = await gate.through(Deadline.in(10_000), 'reading the member list', () => never).catch((err: unknown) => err);

    expect(isNoQuorum(refusal)).toBe(true);
    expect((refusal as Error).message).toMatch(/^no quorum: 1 of 3 voters answer, 2 needed; .*\(reading the member list\)$/);
    expect(asked).toEqual([]);
    const lines = logs()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'warn',
        message: 'no quorum of voters answers: the call answers unavailable',
        step: 'reading the member list',
        voters: 3,
        healthyVoters: 1,
        required: 2,
        by: 'observation',
        silent: [
          { member: 'etcd-b', error: 'http://etcd-b:2379: etcd is unreachable' },
          { member: 'etcd-c', error: 'http://etcd-c:2379: etcd is unreachable' },
        ],
      }),
    ]);
  });

  it("when the observation's silent voters ran out of time and the gate's own probe finds them refusing, then the call answers unavailable, by the probe", async () => {
    const down = new Set([members[1].clientURLs[0], members[2].clientURLs[0]]);
    const { gate, asked, logs } = gateOver(observation(1, 2), down);
    const never = new Promise<string>(() => undefined);

    const refusal = await gate.through(Deadline.in(10_000), 'taking the membership lock', () => never).catch((err: unknown) => err);

    expect(isNoQuorum(refusal)).toBe(true);
    // Each silent voter was asked twice (the second time with twice the status timeout) before the verdict.
    expect(asked.filter((url) => down.has(url))).toHaveLength(4);
    expect(JSON.parse(logs().trim())).toMatchObject({
      by: 'probe',
      healthyVoters: 1,
      silent: [{ member: 'etcd-b' }, { member: 'etcd-c' }],
    });
  });
});
