/**
 * chooseSource over a scripted cluster of 3 voters (a leads): which member a backup is taken from,
 * or its `unsafe` refusal, and every Status call it made. A member that answers late once is asked
 * again before the backup is refused; which member is chosen from the answers is the pure rule's
 * (backup-source-decision.test.ts).
 */
import { chooseSource } from '../../agent/backup/take';
import { Deadline } from '../../agent/lib/deadline';
import { isAgentError } from '../../agent/proto/errors';
import type { MemberList, MemberStatus } from '../../agent/proto/types';
import { list, member, memberStatus } from '../helpers/membership-fixtures';

const cluster3 = list(member('a'), member('b'), member('c'));
const STATUS_TIMEOUT_MS = 500;

/** What a member does on each Status call, in turn (the last repeats): answers, runs out of time, or refuses (killed). */
type Does = 'answers' | 'late' | 'refuses';

/** The chosen member's id or `unsafe`, and every Status call it made as `<member id> <timeout ms>`, sorted. */
async function choose(script: Record<string, Does[]>): Promise<{ chosen: string; asked: string[] }> {
  const asked: string[] = [];
  const cluster = {
    listMembers: async (): Promise<MemberList> => cluster3,
    memberStatus: async (url: string, timeoutMs: number): Promise<MemberStatus> => {
      const id = cluster3.members.find((m) => m.clientURLs[0] === url)?.id ?? '?';
      const calls = asked.filter((a) => a.startsWith(`${id} `)).length;
      asked.push(`${id} ${timeoutMs}`);
      const does = script[id][Math.min(calls, script[id].length - 1)];
      if (does === 'late') throw new Error('4 DEADLINE_EXCEEDED: Deadline exceeded');
      if (does === 'refuses') throw new Error('14 UNAVAILABLE: No connection established. Last error: connect ECONNREFUSED');
      return memberStatus(id, 'a', 100);
    },
  };
  try {
    const source = await chooseSource({ cluster, statusTimeoutMs: STATUS_TIMEOUT_MS }, Deadline.in(30_000));
    return { chosen: source.member.id, asked: asked.sort() };
  } catch (err) {
    if (!isAgentError(err, 'unsafe')) throw err;
    return { chosen: 'unsafe', asked: asked.sort() };
  }
}

describe('chooseSource', () => {
  it.each<[string, string, Record<string, Does[]>, string[]]>([
    ['every member answers', 'b', { a: ['answers'], b: ['answers'], c: ['answers'] }, ['a 500', 'b 500', 'c 500']],
    [
      'one follower answers late (nobody is asked again)',
      'c',
      { a: ['answers'], b: ['late'], c: ['answers'] },
      ['a 500', 'b 500', 'c 500'],
    ],
    [
      'both followers answer late once (each is asked again, with twice the time)',
      'b',
      { a: ['answers'], b: ['late', 'answers'], c: ['late', 'answers'] },
      ['a 500', 'b 1000', 'b 500', 'c 1000', 'c 500'],
    ],
    [
      'both followers refuse (killed), twice',
      'unsafe',
      { a: ['answers'], b: ['refuses'], c: ['refuses'] },
      ['a 500', 'b 1000', 'b 500', 'c 1000', 'c 500'],
    ],
    [
      'both followers answer late, twice',
      'unsafe',
      { a: ['answers'], b: ['late'], c: ['late'] },
      ['a 500', 'b 1000', 'b 500', 'c 1000', 'c 500'],
    ],
  ])('when %s, then it answers %s', async (_, chosen, script, asked) => {
    expect(await choose(script)).toEqual({ chosen, asked });
  });

  it('when it refuses, then the refusal names every member with the answer of its last ask', async () => {
    const err = await chooseSource(
      {
        cluster: {
          listMembers: async () => cluster3,
          memberStatus: async (url: string) => {
            if (url === cluster3.members[0].clientURLs[0]) return memberStatus('a', 'a', 100);
            throw new Error('14 UNAVAILABLE: No connection established. Last error: connect ECONNREFUSED');
          },
        },
        statusTimeoutMs: STATUS_TIMEOUT_MS,
      },
      Deadline.in(30_000),
    ).catch((e: unknown) => e);
    expect(isAgentError(err, 'unsafe') && err.details?.reason).toBe('unhealthy');
    expect((err as Error).message).toMatch(/no quorum: 1 of 3 voters agree on a leader.*etcd-b: no Status answer/);
  });
});
