import {
  decideNudge,
  NUDGE_AFTER_MS,
  NUDGE_EVERY_MS,
  type NudgeDecision,
  type NudgeFacts,
} from '../../agent/membership/apply-nudge-decision';
import type { Member } from '../../agent/proto/types';

const member = (over: Partial<Member>): Member => ({
  id: 'd69daa9f32e2274f',
  name: 'etcd-3',
  peerURLs: ['http://etcd-3:2380'],
  clientURLs: [],
  isLearner: true,
  started: true,
  ...over,
});
const learner = member({});
const unstarted = member({ name: '', started: false });
const voter = member({ isLearner: false });
const silent = NUDGE_AFTER_MS;

describe('decideNudge', () => {
  it.each<[string, NudgeFacts, NudgeDecision]>([
    ['the local etcd answers', { localSilentForMs: undefined, listed: learner, sinceLastNudgeMs: undefined }, 'nothing'],
    ['the local etcd has just gone silent', { localSilentForMs: silent - 1, listed: learner, sinceLastNudgeMs: undefined }, 'wait'],
    ['the member list could not be read', { localSilentForMs: silent, listed: undefined, sinceLastNudgeMs: undefined }, 'wait'],
    ["this pod's member is not listed", { localSilentForMs: silent, listed: null, sinceLastNudgeMs: undefined }, 'nothing'],
    ["this pod's member is a started voter", { localSilentForMs: silent, listed: voter, sinceLastNudgeMs: undefined }, 'nothing'],
    ['a silent learner, never nudged', { localSilentForMs: silent, listed: learner, sinceLastNudgeMs: undefined }, 'nudge'],
    ['a silent unstarted member, never nudged', { localSilentForMs: silent, listed: unstarted, sinceLastNudgeMs: undefined }, 'nudge'],
    [
      'an unstarted voter (learners off), never nudged',
      { localSilentForMs: silent, listed: member({ isLearner: false, started: false, name: '' }), sinceLastNudgeMs: undefined },
      'nudge',
    ],
    ['a silent learner nudged recently', { localSilentForMs: silent * 10, listed: learner, sinceLastNudgeMs: NUDGE_EVERY_MS - 1 }, 'wait'],
    ['a silent learner nudged a while ago', { localSilentForMs: silent * 10, listed: learner, sinceLastNudgeMs: NUDGE_EVERY_MS }, 'nudge'],
  ])('when %s, then: %s', (_what, facts, decision) => {
    expect(decideNudge(facts)).toBe(decision);
  });
});
