import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { DataDirState } from '../../agent/etcd-data/data-dir';
import { moveAside } from '../../agent/etcd-data/data-dir';
import { createLogger } from '../../agent/observability/logger';
import { removeStaleAsides } from '../../agent/prepare/aside-cleanup';
import { ASIDE_KEEP, ASIDE_MAX_AGE_MS, decideAsides, isVoterAgain, parseAside, type Aside } from '../../agent/prepare/aside-decision';
import type { MemberList } from '../../agent/proto/types';
import { captureLogs } from '../helpers/log-capture';
import { learner, list, member } from '../helpers/membership-fixtures';

const NOW = Date.parse('2026-12-10T12:00:00Z');
const DAY = 24 * 3600 * 1000;
/** An aside moved `ago` ms before NOW, named as moveAside names it. */
const aside = (ago: number, seq = 0): Aside => {
  const movedAt = new Date(NOW - ago);
  const stamp = movedAt
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  return { name: `default.etcd.removed-${stamp}${seq === 0 ? '' : `-${seq}`}`, movedAt, seq };
};

describe('decideAsides', () => {
  // Each row: the asides (by age), whether the member is a voter again, and the fates, newest first.
  it.each<[string, string, Aside[], boolean]>([
    ['nothing lies aside', '', [], false],
    ['one, an hour old, the member not a voter yet', 'keep', [aside(3600_000)], false],
    ['one, a month old, the member not a voter yet (a learner, or not joined)', 'keep', [aside(30 * DAY)], false],
    ['one, an hour old, the member a voter again', 'keep', [aside(3600_000)], true],
    ['one, 8 days old, the member a voter again', 'remove', [aside(8 * DAY)], true],
    ['one, 7 days old to the second, the member a voter again', 'keep', [aside(7 * DAY)], true],
    ['two, 8 and 9 days old, the member not a voter yet: the newest stays', 'keep remove', [aside(9 * DAY), aside(8 * DAY)], false],
    ['two, 8 and 9 days old, the member a voter again', 'remove remove', [aside(9 * DAY), aside(8 * DAY)], true],
    [
      'three, a day apart, the member not a voter yet: beyond the two newest',
      'keep keep remove',
      [aside(3 * DAY), aside(1 * DAY), aside(2 * DAY)],
      false,
    ],
    ['three, a day apart, the member a voter again', 'keep keep remove', [aside(1 * DAY), aside(2 * DAY), aside(3 * DAY)], true],
    [
      'two moved in one second and an older one: the numbered one is the newer',
      'keep keep remove',
      [aside(DAY, 0), aside(DAY, 1), aside(2 * DAY)],
      false,
    ],
    ['one moved in the future (a clock set back since): kept, as a young one', 'keep', [aside(-DAY)], true],
  ])('when %s, then %s', (_case, expected, asides, voterAgain) => {
    const verdicts = decideAsides({ asides, nowMs: NOW, voterAgain });
    expect(verdicts.map((v) => v.action).join(' ')).toBe(expected);
    // Newest first, each with a reason a log line can give.
    const sorted = [...asides].sort((a, b) => b.movedAt.getTime() - a.movedAt.getTime() || b.seq - a.seq);
    expect(verdicts.map((v) => v.name)).toEqual(sorted.map((a) => a.name));
    for (const v of verdicts) expect(v.why).not.toBe('');
  });

  it('when the member is not a voter yet, then the newest is kept and says why', () => {
    expect(decideAsides({ asides: [aside(30 * DAY)], nowMs: NOW, voterAgain: false })[0].why).toBe(
      'the newest, kept until this member is a started voter again',
    );
  });

  it('then the bounds are a week and two copies', () => {
    expect(ASIDE_MAX_AGE_MS).toBe(7 * DAY);
    expect(ASIDE_KEEP).toBe(2);
  });
});

describe('parseAside', () => {
  it.each<[string, string, string | undefined]>([
    ['a move', 'default.etcd.removed-20261201T070000Z', '2026-12-01T07:00:00.000Z 0'],
    ['a second move in that second', 'default.etcd.removed-20261201T070000Z-1', '2026-12-01T07:00:00.000Z 1'],
    ['the data directory itself', 'default.etcd', undefined],
    ["another data directory's", 'other.etcd.removed-20261201T070000Z', undefined],
    ['a name moveAside never writes', 'default.etcd.removed-keep-me', undefined],
    ['a 13th month', 'default.etcd.removed-20261301T070000Z', undefined],
    ['a 61st second', 'default.etcd.removed-20261201T070061Z', undefined],
    ['a suffix of 0', 'default.etcd.removed-20261201T070000Z-0', undefined],
    ['something after the stamp', 'default.etcd.removed-20261201T070000Z.tar', undefined],
  ])('when the name is %s, then %s', (_case, entry, expected) => {
    const parsed = parseAside('default.etcd', entry);
    expect(parsed === undefined ? undefined : `${parsed.movedAt.toISOString()} ${parsed.seq}`).toBe(expected);
  });
});

describe('isVoterAgain', () => {
  const own: DataDirState = { kind: 'member', memberId: 'b', clusterId: 'c1' };
  it.each<[string, boolean, DataDirState, MemberList | undefined]>([
    ['the current data holds a started voter the cluster lists', true, own, list(member('a'), member('b'))],
    ['it is a learner', false, own, list(member('a'), learner('b'))],
    ['it is listed unstarted', false, own, list(member('a'), member('b', { started: false, learner: false }))],
    ['the cluster does not list it', false, own, list(member('a'))],
    ['the cluster is another one', false, { ...own, clusterId: 'c2' }, list(member('a'), member('b'))],
    ['the data directory is empty', false, { kind: 'empty' }, list(member('a'), member('b'))],
    ['no member list was read', false, own, undefined],
  ])('when %s, then %s', (_case, expected, dataDir, members) => {
    expect(isVoterAgain(dataDir, members)).toBe(expected);
  });
});

describe('removeStaleAsides', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aside-cleanup-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('when three copies lie aside and the member is a voter again, then the one beyond the count and the one past a week go, each logged, and nothing else is touched', () => {
    const data = path.join(dir, 'default.etcd');
    const moves = [NOW - 10 * DAY, NOW - 3 * DAY, NOW - 2 * DAY, NOW - DAY].map((at) => {
      fs.mkdirSync(path.join(data, 'member', 'wal'), { recursive: true });
      fs.writeFileSync(path.join(data, 'member', 'wal', '0.wal'), String(at));
      return moveAside(data, new Date(at));
    });
    fs.mkdirSync(data);
    fs.writeFileSync(path.join(data, 'live'), 'x');
    // Not directories prepare moved aside: a file and a link of such names, another name.
    fs.writeFileSync(path.join(dir, 'default.etcd.removed-20200101T000000Z'), 'a file');
    fs.symlinkSync(moves[2], path.join(dir, 'default.etcd.removed-20200102T000000Z'));
    fs.mkdirSync(path.join(dir, 'default.etcd.removed-by-hand'));
    const logs = captureLogs();

    const verdicts = removeStaleAsides(data, true, createLogger({ stream: logs.stream }), 'etcd-1', new Date(NOW));

    expect(verdicts.map((v) => `${path.basename(v.name)} ${v.action}`)).toEqual([
      `${path.basename(moves[3])} keep`,
      `${path.basename(moves[2])} keep`,
      `${path.basename(moves[1])} remove`,
      `${path.basename(moves[0])} remove`,
    ]);
    expect(fs.readdirSync(dir).sort()).toEqual(
      [
        'default.etcd',
        'default.etcd.removed-20200101T000000Z',
        'default.etcd.removed-20200102T000000Z',
        'default.etcd.removed-by-hand',
        path.basename(moves[2]),
        path.basename(moves[3]),
      ].sort(),
    );
    expect(fs.readFileSync(path.join(data, 'live'), 'utf8')).toBe('x');
    const lines = logs
      .text()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { message: string; path?: string; kept?: unknown[] });
    expect(lines.filter((l) => l.message === 'removed a data directory moved aside earlier').map((l) => l.path)).toEqual([
      moves[1],
      moves[0],
    ]);
    expect(lines.find((l) => l.message === 'kept data directories moved aside')?.kept).toHaveLength(2);
  });

  it('when nothing lies beside the data directory, then nothing is logged', () => {
    const logs = captureLogs();
    expect(removeStaleAsides(path.join(dir, 'default.etcd'), false, createLogger({ stream: logs.stream }), 'etcd-1')).toEqual([]);
    expect(logs.text()).toBe('');
  });
});
