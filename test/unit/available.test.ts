import { availabilityOf, stampedText } from '../../agent/health/available';
import { parseStampQuery } from '../../agent/server/available-routes';
import { AgentError } from '../../agent/proto/errors';
import type { ClusterHealth, HealthStatus, LocalHealth, MemberHealth } from '../../agent/health/types';
import { thrownBy } from '../helpers/thrown';

const voter = (name: string, reachable = true, isLearner = false): MemberHealth => ({
  id: `id-${name}`,
  name,
  isLearner,
  started: true,
  reachable,
  isLeader: name === 'etcd-0',
  raftTerm: reachable ? 2 : null,
  raftIndex: reachable ? 10 : null,
  raftAppliedIndex: reachable ? 10 : null,
  dbSizeBytes: reachable ? 1 : null,
  dbSizeInUseBytes: reachable ? 1 : null,
  latencyMs: reachable ? 1 : null,
  errors: reachable ? [] : ['did not answer'],
});

/** A cluster of `members` as /v1/health classifies it (quorum counted from the voters that answered). */
function cluster(members: MemberHealth[], status?: HealthStatus): ClusterHealth {
  const voters = members.filter((m) => !m.isLearner);
  const healthy = voters.filter((m) => m.reachable).length;
  const required = Math.floor(voters.length / 2) + 1;
  const hasQuorum = healthy >= required;
  return {
    status: status ?? (hasQuorum ? (healthy === voters.length ? 'healthy' : 'degraded') : 'unavailable'),
    quorum: { voters: voters.length, healthyVoters: healthy, required, hasQuorum, faultTolerance: Math.max(0, healthy - required) },
    leader: hasQuorum ? { id: 'id-etcd-0', name: 'etcd-0' } : null,
    members,
    alarms: [],
    errors: hasQuorum ? [] : ['no quorum of reachable voters'],
  };
}

const unknown: ClusterHealth = {
  status: 'unknown',
  quorum: null,
  leader: null,
  members: [],
  alarms: [],
  errors: ['no observation finished within 1000 ms'],
};
const local = (member: MemberHealth, ready = true): LocalHealth => {
  const role = member.isLearner ? 'learner' : member.isLeader ? 'leader' : 'follower';
  return {
    ready,
    member: { ...member, role, listed: true, errors: ready ? member.errors : [...member.errors, 'its etcd does not answer'] },
    reading: ready
      ? { kind: 'role', role }
      : { kind: 'not-answering', endpoint: `http://${member.name}:2379`, error: 'its etcd does not answer' },
  };
};
const three = [voter('etcd-0'), voter('etcd-1'), voter('etcd-2')];
const oneDown = [voter('etcd-0'), voter('etcd-1'), voter('etcd-2', false)];
const twoDown = [voter('etcd-0'), voter('etcd-1', false), voter('etcd-2', false)];
const withLearner = [...three, voter('etcd-3', true, true)];

describe('availabilityOf (GET /v1/available, KubeBlocks availableProbe)', () => {
  it.each<[string, string, ClusterHealth, LocalHealth]>([
    [
      'every voter answers and this pod is a voter',
      'available: etcd-1 is a healthy voter; 3 of 3 voters healthy, 2 required',
      cluster(three),
      local(three[1]),
    ],
    [
      'one voter of three is down and this pod is another',
      'available: etcd-0 is a healthy voter; 2 of 3 voters healthy, 2 required',
      cluster(oneDown),
      local(oneDown[0]),
    ],
    [
      'this pod is the one voter down',
      'unavailable: etcd-2 is not ready: its etcd does not answer',
      cluster(oneDown),
      local(oneDown[2], false),
    ],
    ['two voters of three are down', 'unavailable: no quorum: 1 of 3 voters healthy, 2 required', cluster(twoDown), local(twoDown[0])],
    ['no observation finished in time', 'unavailable: no observation finished within 1000 ms', unknown, local(three[0])],
    [
      'the quorum answers but names no leader',
      'unavailable: no leader',
      { ...cluster(three), status: 'unavailable', leader: null, errors: ['no leader'] },
      local(three[0]),
    ],
    ['this pod is a learner', 'unavailable: etcd-3 is a learner, not yet a voter', cluster(withLearner), local(withLearner[3])],
    [
      'this pod answers but the observation did not count it',
      'unavailable: etcd-2 is not among the healthy voters (2 of 3 voters healthy, 2 required)',
      cluster(oneDown),
      local(voter('etcd-2')),
    ],
    [
      'this pod is not in the member list',
      'unavailable: etcd-9 is not among the healthy voters (3 of 3 voters healthy, 2 required)',
      cluster(three),
      local(voter('etcd-9')),
    ],
  ])('when %s, then %s', (_what, said, health, mine) => {
    const verdict = availabilityOf(health, mine);
    expect(verdict.available ? verdict.text : `unavailable: ${verdict.reason}`).toBe(said);
  });
});

describe('stampedText (GET /v1/available?stampSeconds=N)', () => {
  const text = 'available: etcd-0 is a healthy voter; 3 of 3 voters healthy, 2 required';
  it.each<[string, string | null, number, string]>([
    ['floored to 10 s', '2026-12-05T23:41:37.413Z', 10, `${text}; as of 2026-12-05T23:41:30Z`],
    ['on the boundary itself', '2026-12-05T23:41:30.000Z', 10, `${text}; as of 2026-12-05T23:41:30Z`],
    ['just before the next one', '2026-12-05T23:41:39.999Z', 10, `${text}; as of 2026-12-05T23:41:30Z`],
    ['floored to a minute', '2026-12-05T23:41:37.413Z', 60, `${text}; as of 2026-12-05T23:41:00Z`],
    ['one second', '2026-12-05T23:41:37.413Z', 1, `${text}; as of 2026-12-05T23:41:37Z`],
    ['no observation time', null, 10, text],
  ])('when %s, then the text says so', (_what, observedAt, seconds, said) => {
    expect(stampedText(text, observedAt, seconds)).toBe(said);
  });

  it('when two answers fall in one period, then they are the same text, and in the next one another', () => {
    const a = stampedText(text, '2026-12-05T23:41:31.000Z', 15);
    expect(stampedText(text, '2026-12-05T23:41:44.999Z', 15)).toBe(a);
    expect(stampedText(text, '2026-12-05T23:41:45.000Z', 15)).not.toBe(a);
  });
});

describe('parseStampQuery', () => {
  it.each<[string, Record<string, unknown>, number | undefined]>([
    ['absent', {}, undefined],
    ['one second', { stampSeconds: '1' }, 1],
    ['ten seconds', { stampSeconds: '10' }, 10],
    ['an hour', { stampSeconds: '3600' }, 3600],
  ])('when it is %s, then it reads %s', (_what, query, seconds) => {
    expect(parseStampQuery(query as never)).toBe(seconds);
  });

  it.each<[string, Record<string, unknown>]>([
    ['zero', { stampSeconds: '0' }],
    ['over an hour', { stampSeconds: '3601' }],
    ['a fraction', { stampSeconds: '1.5' }],
    ['negative', { stampSeconds: '-5' }],
    ['empty', { stampSeconds: '' }],
    ['a word', { stampSeconds: 'ten' }],
    ['given twice', { stampSeconds: ['10', '10'] }],
  ])('when it is %s, then it is a bad request naming the field', (_what, query) => {
    const thrown = thrownBy(() => parseStampQuery(query as never));
    expect(thrown).toBeInstanceOf(AgentError);
    expect({ code: (thrown as AgentError).code, field: (thrown as AgentError).details?.field }).toEqual({
      code: 'bad-request',
      field: 'stampSeconds',
    });
  });
});
