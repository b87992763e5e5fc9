import { RevisionHistory } from '../../agent/maintenance/revision-history';

const T0 = Date.UTC(2026, 2, 1);
const s = (seconds: number): number => T0 + seconds * 1000;

function history(samples: Array<[number, number]>): RevisionHistory {
  const h = new RevisionHistory();
  for (const [seconds, revision] of samples) h.add(s(seconds), revision);
  return h;
}

describe('revision history: which revision was current when', () => {
  const h = history([
    [0, 100],
    [10, 150],
    [20, 150],
    [30, 400],
  ]);

  it.each<[string, number, number | undefined]>([
    ['before the first sample', -1, undefined],
    ['at the first sample', 0, 100],
    ['between two samples', 15, 150],
    ['at a later sample', 30, 400],
    ['after the last sample', 1000, 400],
  ])('when asked %s, then the answer is a revision current then (%s s → %s)', (_what, seconds, revision) => {
    expect(h.revisionAt(s(seconds))).toBe(revision);
  });

  it.each<[string, Array<[number, number]>, number, number | undefined]>([
    [
      'a lower revision later (a lagging member) is ignored',
      [
        [0, 100],
        [5, 90],
        [10, 120],
      ],
      6,
      100,
    ],
    [
      'a sample older than the last one is ignored',
      [
        [10, 100],
        [5, 50],
      ],
      6,
      undefined,
    ],
    [
      'a zero revision (no header) is ignored',
      [
        [0, 0],
        [5, 10],
      ],
      2,
      undefined,
    ],
    [
      'samples within a second keep the first of that second',
      [
        [0, 100],
        [1, 101],
        [1.2, 102],
        [1.5, 103],
      ],
      1.4,
      101,
    ],
  ])('when %s, then it is as the table says', (_what, samples, seconds, revision) => {
    expect(history(samples).revisionAt(s(seconds))).toBe(revision);
  });

  it('when a week of samples arrives once a minute, then at most 512 are kept, the oldest is still the first, and every answer stays conservative', () => {
    const h2 = new RevisionHistory();
    const week = 7 * 86_400;
    for (let t = 0; t <= week; t += 60) h2.add(s(t), 1000 + t);
    expect(h2.size).toBeLessThanOrEqual(512);
    expect(h2.oldest()).toBe(s(0));
    for (const ago of [60, 3600, 6 * 3600, 86_400, 3 * 86_400, 6 * 86_400]) {
      const at = week - ago;
      const revision = h2.revisionAt(s(at)) as number;
      // A revision current at or before the time asked: compacting to it keeps everything since.
      expect(revision).toBeLessThanOrEqual(1000 + at);
      expect(revision).toBeGreaterThan(1000 + at - ago);
    }
  });
});
