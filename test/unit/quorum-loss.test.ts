import { QuorumLossClock, QuorumSighting } from '../../agent/health/quorum-loss';

const GAP = 15_000;
const lost = (at: number): QuorumSighting => ({ at, hasQuorum: false });
const held = (at: number): QuorumSighting => ({ at, hasQuorum: true });
const late = (at: number): QuorumSighting => ({ at, hasQuorum: undefined });

describe('QuorumLossClock', () => {
  it.each<[string, QuorumSighting[], number, number | undefined]>([
    ['nothing was seen', [], 1000, undefined],
    ['the quorum was always there', [held(0), held(1000)], 2000, undefined],
    ['it was lost from the first look on', [lost(0), lost(1000), lost(2000)], 2500, 0],
    ['it was lost, came back, and was lost again', [lost(0), lost(1000), held(2000), lost(3000), lost(4000)], 4500, 3000],
    ['a gap longer than the rule split the stretch', [lost(0), lost(1000), lost(17_000), lost(18_000)], 18_500, 17_000],
    ['a gap just within the rule did not', [lost(0), lost(15_000), lost(16_000)], 16_500, 0],
    ['nobody has looked for longer than the rule since', [lost(0), lost(1000)], 16_001, undefined],
    [
      'late looks that found no quorum are no evidence, and the gap around them counts',
      [lost(0), late(5000), late(10_000), late(16_000), lost(17_000)],
      17_500,
      17_000,
    ],
    ['a sighting older than the last one is ignored (observations overlap)', [lost(1000), held(500), lost(2000)], 2500, 1000],
  ])('when %s, then the loss is seen since %s', (_story, sightings, now, expected) => {
    const clock = new QuorumLossClock(GAP);
    for (const s of sightings) clock.see(s);
    expect(clock.since(now)).toBe(expected);
  });

  it('when the last look that counted found the quorum lost, then the recovery service keeps looking', () => {
    const clock = new QuorumLossClock(GAP);
    expect(clock.lastSawLoss()).toBe(false);
    clock.see(lost(0));
    expect(clock.lastSawLoss()).toBe(true);
    clock.see(held(1000));
    expect(clock.lastSawLoss()).toBe(false);
  });
});
