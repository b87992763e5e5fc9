import { decideRetention, type RetainedBackup, type RetentionPolicy } from '../../agent/backup/retention-decision';
import type { VerificationState } from '../../agent/proto/backup';

const NOW = new Date('2026-06-10T12:00:00Z');
const DAY = 86_400_000;

/** Backups b1 (oldest) … bN, one a day, the newest finished an hour ago; `states` gives each one's state. */
function backups(...states: VerificationState[]): RetainedBackup[] {
  return states.map((state, i) => ({
    name: `2026060${i + 1}T000000.000Z-00000${i}`,
    state,
    finishedAt: new Date(NOW.getTime() - 3_600_000 - (states.length - 1 - i) * DAY),
  }));
}

const short = (names: string[]): string[] => names.map((n) => `b${Number(n[7])}`);
const grace = { orphanGraceSeconds: 3600 };

describe('decideRetention', () => {
  it.each<[string, VerificationState[], Partial<RetentionPolicy>, string[], string | undefined]>([
    ['neither rule is set: everything is kept', ['verified', 'verified', 'verified'], {}, [], undefined],
    ['keep the last 2 of 4', ['verified', 'verified', 'verified', 'verified'], { keepLast: 2 }, ['b1', 'b2'], undefined],
    [
      'keep the last 2, and the newest verified is older: it stays',
      ['verified', 'failed', 'unverified', 'unverified'],
      { keepLast: 2 },
      ['b2'],
      'b1',
    ],
    [
      'keep the last 1, none verified: only the newest stays',
      ['failed', 'unverified', 'unverified'],
      { keepLast: 1 },
      ['b1', 'b2'],
      undefined,
    ],
    [
      'keep for 36 h: two a day apart are younger',
      ['verified', 'verified', 'verified', 'verified'],
      { keepForSeconds: 36 * 3600 },
      ['b1', 'b2'],
      undefined,
    ],
    [
      'keep the last 1 or for 3 days: the union is kept',
      ['verified', 'verified', 'verified', 'verified', 'verified'],
      { keepLast: 1, keepForSeconds: 3 * 86_400 },
      ['b1', 'b2'],
      undefined,
    ],
    ['keep the last 3 of 3: nothing goes', ['unverified', 'unverified', 'unverified'], { keepLast: 3 }, [], undefined],
  ])('when %s, then it removes %j', (_, states, policy, removed, keptAsNewestVerified) => {
    const decision = decideRetention(backups(...states), [], { ...grace, ...policy }, NOW);
    expect(short(decision.remove)).toEqual(removed);
    expect(decision.keptAsNewestVerified === undefined ? undefined : short([decision.keptAsNewestVerified])[0]).toBe(keptAsNewestVerified);
  });

  it('when the backups come in any order, then the decision is the same', () => {
    const list = backups('verified', 'verified', 'verified', 'verified');
    const forward = decideRetention(list, [], { ...grace, keepLast: 2 }, NOW);
    const backward = decideRetention([...list].reverse(), [], { ...grace, keepLast: 2 }, NOW);
    expect(backward).toEqual(forward);
  });

  it.each<[string, string, number, boolean]>([
    ['a snapshot without a manifest older than the grace is removed', 'snapshot.db', 2 * 3600, true],
    ['one younger than the grace may be a run writing its manifest: kept', 'snapshot.db', 60, false],
    ['a manifest without its snapshot older than the grace is removed', 'manifest.json', 2 * 3600, true],
    ['one younger than the grace may be a verification finding its backup gone: kept', 'manifest.json', 60, false],
  ])('when %s', (_, file, ageSeconds, removed) => {
    const orphan = { key: `20260610T100000.000Z-abcdef/${file}`, modifiedAt: new Date(NOW.getTime() - ageSeconds * 1000) };
    expect(decideRetention([], [orphan], grace, NOW).removeOrphans).toEqual(removed ? [orphan.key] : []);
  });
});
