import { chooseBackup, decideRestore, restorerOf, type RestoreAsk, type RestoreFacts } from '../../agent/backup/restore-decision';
import type { Backups } from '../../agent/backup/layout';
import type { BackupEntry, Manifest, Verification } from '../../agent/proto/backup';
import { classifyAnswer } from '../../agent/prepare/answer-server';
import { decidePrepare, type PeerAnswer, type PrepareFacts } from '../../agent/prepare/decide';

const url = (n: number): string => `http://etcd-${n}.etcd-headless:2380`;
const initial = [0, 1, 2].map((n) => ({ name: `etcd-${n}`, peerURL: url(n) }));
const self = (n: number): RestoreFacts['self'] => ({ name: `etcd-${n}`, peerURL: url(n) });
const asked: RestoreAsk = { source: 'file:///backups' };
const named: RestoreAsk = { source: 'file:///backups', backup: '20261204T230000.123Z-1a2b3c' };
const empty: PeerAnswer = { kind: 'empty' };
/** `--initial-cluster` as a pod given `members` writes it. */
const text = (members: readonly { name: string; peerURL: string }[]): string => members.map((m) => `${m.name}=${m.peerURL}`).join(',');
/** A peer waiting for the restore asked, given the same initial cluster. */
const waiting: PeerAnswer = { kind: 'restore', restore: { ...asked, initialCluster: text(initial) } };
/** The answers of the initial members other than `me`, in order. */
const peers = (me: number, ...answers: PeerAnswer[]): Map<string, PeerAnswer> =>
  new Map(
    initial
      .filter((_, i) => i !== me)
      .map((m, i) => [m.name, answers[i]] as [string, PeerAnswer])
      .filter(([, a]) => a !== undefined),
  );

/** The verdict in a few words: its kind, and for a wait the names it gives. */
function said(f: RestoreFacts): string {
  const v = decideRestore(f);
  return v.kind === 'wait' ? `wait: ${v.reason}` : v.kind;
}

describe('decideRestore (no cluster answers, this data directory empty)', () => {
  it.each<[string, string, RestoreFacts]>([
    ['no restore is asked and the peers are not asked yet', 'none', { self: self(1), initial }],
    ['no restore is asked and every peer is empty', 'none', { self: self(1), initial, peers: peers(1, empty, empty) }],
    [
      'no restore is asked and a peer waits for a restore (a misconfigured set)',
      'wait: etcd-0 (the newest verified backup from file:///backups)',
      { self: self(1), initial, peers: peers(1, waiting, empty) },
    ],
    ['a restore is asked and this pod is the restorer, the peers not asked yet', 'ask-peers', { self: self(0), initial, asked }],
    [
      'a restore is asked and every other initial member waits for it',
      'restore',
      { self: self(0), initial, asked, peers: peers(0, waiting, waiting) },
    ],
    [
      'a restore is asked and the others report empty data, not asked themselves',
      'restore',
      { self: self(0), initial, asked, peers: peers(0, empty, empty) },
    ],
    [
      'a restore is asked and one member still has data',
      'wait: etcd-2 (its data directory is member)',
      { self: self(0), initial, asked, peers: peers(0, waiting, { kind: 'has-data', detail: 'its data directory is member' }) },
    ],
    [
      'a restore is asked and one member does not answer (down, data unknown)',
      'wait: etcd-1 (refused)',
      { self: self(0), initial, asked, peers: peers(0, { kind: 'no-answer', detail: 'refused' }, waiting) },
    ],
    [
      'a restore is asked and one member was not asked',
      'wait: etcd-2 (not asked)',
      { self: self(0), initial, asked, peers: peers(0, waiting) },
    ],
    [
      'a restore is asked and a peer bootstraps a new cluster',
      'wait: etcd-1 (bootstrapping a new cluster)',
      { self: self(0), initial, asked, peers: peers(0, { kind: 'bootstrap', plan: { initialCluster: 'x', token: 't' } }, waiting) },
    ],
    [
      'a restore is asked and a peer waits for another backup',
      'wait: etcd-2 (waits for another restore: backup 20261204T230000.123Z-1a2b3c from file:///backups)',
      { self: self(0), initial, asked, peers: peers(0, waiting, { kind: 'restore', restore: named }) },
    ],
    [
      'a restore is asked and this pod is not the initial member whose name sorts first',
      'wait: etcd-0, the initial member whose name sorts first, restores',
      { self: self(1), initial, asked, peers: peers(1, waiting, waiting) },
    ],
    [
      "a restore is asked and this pod is written first in its list, but another member's name sorts first",
      'wait: etcd-0, the initial member whose name sorts first, restores',
      { self: self(1), initial: [initial[1], initial[0], initial[2]], asked },
    ],
    [
      'a restore is asked and this pod, whose name sorts first, is written last in its list',
      'restore',
      { self: self(0), initial: [initial[2], initial[1], initial[0]], asked, peers: peers(0, waiting, waiting) },
    ],
    [
      'a restore is asked and a peer waits for it, given the same members in another order',
      'restore',
      {
        self: self(0),
        initial,
        asked,
        peers: peers(0, { kind: 'restore', restore: { ...asked, initialCluster: text([initial[2], initial[0], initial[1]]) } }, waiting),
      },
    ],
    [
      'a restore is asked and a peer waits for it, given another initial cluster',
      'wait: etcd-1 (waits for this restore with another initial cluster',
      {
        self: self(0),
        initial,
        asked,
        peers: peers(
          0,
          { kind: 'restore', restore: { ...asked, initialCluster: text([...initial, { name: 'etcd-3', peerURL: url(3) }]) } },
          waiting,
        ),
      },
    ],
    [
      "a restore is asked and a peer waits for it without saying its initial cluster (an older agent's answer)",
      'wait: etcd-2 (waits for this restore, but does not say its initial cluster)',
      { self: self(0), initial, asked, peers: peers(0, waiting, { kind: 'restore', restore: asked }) },
    ],
    ['a restore is asked and this pod is not an initial member', 'wait: not an initial member', { self: self(3), initial, asked }],
    [
      'a restore is asked and the initial cluster gives this name another peer URL',
      'wait: not an initial member',
      { self: { name: 'etcd-0', peerURL: url(7) }, initial, asked },
    ],
    ['a restore is asked and there is no initial cluster', 'wait: not an initial member', { self: self(0), initial: [], asked }],
  ])('when %s, then the restore rule says: %s', (_story, expected, facts) => {
    const verdict = said(facts);
    if (expected.startsWith('wait: ')) {
      expect(verdict.startsWith('wait: ')).toBe(true);
      expect(verdict).toContain(expected.slice('wait: '.length));
    } else {
      expect(verdict).toBe(expected);
    }
  });

  it('when the pods were given the same members in different orders, then exactly one of them restores', () => {
    // Each pod written first in its own list: a rule by list order would have all three restore.
    const orders = [initial, [initial[1], initial[0], initial[2]], [initial[2], initial[1], initial[0]]];
    // Each pod i is given orders[i]; each peer answers that it waits for the restore with its own list.
    const answerOf = (i: number): PeerAnswer => ({ kind: 'restore', restore: { ...asked, initialCluster: text(orders[i]) } });
    const verdicts = [0, 1, 2].map(
      (i) =>
        decideRestore({
          self: self(i),
          initial: orders[i],
          asked,
          peers: new Map([0, 1, 2].filter((j) => j !== i).map((j) => [`etcd-${j}`, answerOf(j)] as [string, PeerAnswer])),
        }).kind,
    );
    expect(verdicts).toEqual(['restore', 'wait', 'wait']);
  });

  it.each<[string, string[], string]>([
    ['in order', ['etcd-0', 'etcd-1', 'etcd-2'], 'etcd-0'],
    ['reversed', ['etcd-2', 'etcd-1', 'etcd-0'], 'etcd-0'],
    ['names that sort as text, not as numbers', ['etcd-2', 'etcd-10', 'etcd-9'], 'etcd-10'],
  ])('when the initial cluster is written %s, then the restorer is the name that sorts first', (_case, names, restorer) => {
    expect(restorerOf(names.map((name) => ({ name, peerURL: `http://${name}:2380` })))?.name).toBe(restorer);
  });

  it('when no cluster answers for a reason, then the wait names it', () => {
    const v = decideRestore({ self: self(1), initial, asked, unreachable: 'no quorum: 0 of 3 voters answer' });
    expect(v).toMatchObject({ kind: 'wait', reason: expect.stringContaining('no cluster answers (no quorum: 0 of 3 voters answer)') });
  });
});

describe('decidePrepare with a restore asked', () => {
  const down: PrepareFacts['cluster'] = { kind: 'unreachable', reason: 'no endpoint answered' };
  const base = (over: Partial<PrepareFacts>): PrepareFacts => ({
    self: self(0),
    dataDir: { kind: 'empty' },
    cluster: down,
    initial,
    token: 'tok',
    restore: asked,
    ...over,
  });
  const listed = {
    kind: 'answered' as const,
    list: {
      clusterId: 'c1',
      answeredBy: 'a1',
      raftTerm: 2,
      members: [1, 2].map((n) => ({
        id: `a${n}`,
        name: `etcd-${n}`,
        peerURLs: [url(n)],
        clientURLs: [`http://etcd-${n}:2379`],
        isLearner: false,
        started: true,
      })),
    },
  };

  it.each<[string, string, Partial<PrepareFacts>]>([
    ['every other initial member waits for the restore', 'restore', { peers: peers(0, waiting, waiting) }],
    ['the peers are not asked yet', 'ask-peers', {}],
    ['the cluster answers (restored already, or never lost)', 'join', { cluster: listed }],
    [
      'the data directory holds a member (restored before a crash)',
      'start existing',
      { dataDir: { kind: 'member', memberId: 'b0', clusterId: 'c9' } },
    ],
    ['the data directory holds files etcd cannot use', 'move-aside', { dataDir: { kind: 'unusable', reason: 'no WAL' } }],
    [
      'a marker of an earlier bootstrap is there',
      'ask-peers',
      { marker: { initialCluster: initial.map((m) => `${m.name}=${m.peerURL}`).join(','), token: 'tok' } },
    ],
    ['this pod is the second initial member and every peer is empty', 'wait', { self: self(1), peers: peers(1, waiting, empty) }],
    ['no restore is asked and the restorer waits for one', 'wait', { self: self(1), restore: undefined, peers: peers(1, waiting, empty) }],
    ['no restore is asked and every peer is empty', 'start new', { self: self(1), restore: undefined, peers: peers(1, empty, empty) }],
  ])('when %s, then prepare decides: %s', (_story, expected, over) => {
    const step = decidePrepare(base(over));
    expect(step.kind === 'start' ? `start ${step.state}` : step.kind).toBe(expected);
  });
});

describe("a peer's answer with a restore", () => {
  it.each<[string, unknown, string]>([
    ['an empty data directory, asked to restore', { name: 'etcd-0', dataDir: 'empty', bootstrap: null, restore: asked }, 'restore'],
    [
      'asked to restore, with a marker of an earlier bootstrap',
      { name: 'etcd-0', dataDir: 'empty', bootstrap: { initialCluster: 'x', token: 't' }, restore: named },
      'restore',
    ],
    ['asked to restore, with data', { name: 'etcd-0', dataDir: 'member', bootstrap: null, restore: asked }, 'has-data'],
    ['no restore (null)', { name: 'etcd-0', dataDir: 'empty', bootstrap: null, restore: null }, 'empty'],
    ["an older agent's answer, without the field", { name: 'etcd-0', dataDir: 'empty', bootstrap: null }, 'empty'],
    ['a malformed restore', { name: 'etcd-0', dataDir: 'empty', bootstrap: null, restore: { source: 7 } }, 'no-answer'],
    [
      'a restore with a malformed initial cluster',
      { name: 'etcd-0', dataDir: 'empty', bootstrap: null, restore: { source: 'file:///b', initialCluster: 7 } },
      'no-answer',
    ],
  ])('when a peer answers %s, then it counts as %s', (_what, body, kind) => {
    expect(classifyAnswer('etcd-0', body).kind).toBe(kind);
  });
});

describe("a peer's restore answer and its initial cluster", () => {
  it('when a peer answers the restore with its initial cluster, then the answer keeps it for the restorer to compare', () => {
    const restore = { ...asked, initialCluster: text(initial) };
    expect(classifyAnswer('etcd-1', { name: 'etcd-1', dataDir: 'empty', bootstrap: null, restore })).toEqual({ kind: 'restore', restore });
  });
});

describe('chooseBackup', () => {
  const ok: Verification = {
    ok: true,
    verifiedAt: '2026-12-05T00:00:00.000Z',
    durationMs: 10,
    revision: 5,
    keys: 3,
    tool: 'etcdutl 3.6.16',
  };
  const bad: Verification = { ok: false, verifiedAt: '2026-12-05T00:00:00.000Z', durationMs: 10, check: 'etcd-hash', error: 'differs' };
  const entry = (n: number, verification?: Verification): BackupEntry => {
    const name = `2026120${n}T230000.000Z-00000${n}`;
    const manifest: Manifest = {
      format: 1,
      name,
      clusterId: 'c1',
      revision: n * 10,
      etcdVersion: '3.6.16',
      member: { id: 'a1', name: 'etcd-1', clientURL: 'http://etcd-1:2379' },
      agent: 'etcd-1',
      sizeBytes: 100,
      sha256: 'a'.repeat(64),
      startedAt: '2026-12-04T23:00:00.000Z',
      finishedAt: '2026-12-04T23:00:01.000Z',
      durationMs: 1000,
      ...(verification === undefined ? {} : { verification }),
    };
    return { name, state: verification === undefined ? 'unverified' : verification.ok ? 'verified' : 'failed', manifest };
  };
  const store = (entries: BackupEntry[], broken: Backups['broken'] = []): Backups => ({
    entries,
    broken,
    listing: { paired: [], orphans: [] },
  });
  const pick = (backups: Backups, ask: { name?: string; unverified: boolean }): string => {
    const c = chooseBackup(backups, ask);
    return c.kind === 'chosen' ? c.entry.name : `none: ${c.why}`;
  };

  it.each<[string, Backups, { name?: string; unverified: boolean }, string]>([
    ['a newer unverified backup beside an older verified one', store([entry(1, ok), entry(2)]), { unverified: false }, entry(1).name],
    ['the newest is verified', store([entry(1, ok), entry(2, ok)]), { unverified: false }, entry(2).name],
    ['none is verified', store([entry(1), entry(2)]), { unverified: false }, 'none: no backup is verified (2 unverified, 0 failed'],
    ['none is verified, unverified allowed', store([entry(1), entry(2)]), { unverified: true }, entry(2).name],
    ['the newest failed verification, unverified allowed', store([entry(1), entry(2, bad)]), { unverified: true }, entry(1).name],
    [
      'every backup failed verification, unverified allowed',
      store([entry(1, bad)]),
      { unverified: true },
      'none: no backup is verified (0 unverified, 1 failed',
    ],
    ['the store holds nothing', store([]), { unverified: true }, 'none: the store holds no backup'],
    ['a named verified backup', store([entry(1, ok), entry(2, ok)]), { name: entry(1).name, unverified: false }, entry(1).name],
    [
      'a named unverified backup',
      store([entry(1)]),
      { name: entry(1).name, unverified: false },
      'none: backup 20261201T230000.000Z-000001 is not verified',
    ],
    ['a named unverified backup, unverified allowed', store([entry(1)]), { name: entry(1).name, unverified: true }, entry(1).name],
    [
      'a named backup that failed verification',
      store([entry(1, bad)]),
      { name: entry(1).name, unverified: true },
      'none: backup 20261201T230000.000Z-000001 failed its verification (etcd-hash: differs)',
    ],
    [
      'a named backup that is not there',
      store([entry(1, ok)]),
      { name: entry(3).name, unverified: false },
      'none: there is no backup 20261203T230000.000Z-000003',
    ],
    [
      'a named backup whose manifest does not fit its snapshot',
      store([entry(1, ok)], [{ name: entry(2).name, why: 'its snapshot holds 9 bytes, its manifest says 100' }]),
      { name: entry(2).name, unverified: true },
      'none: backup 20261202T230000.000Z-000002 is not whole: its snapshot holds 9 bytes',
    ],
  ])('when %s, then the restore takes: %s', (_story, backups, ask, expected) => {
    const got = pick(backups, ask);
    if (expected.startsWith('none: ')) expect(got).toContain(expected);
    else expect(got).toBe(expected);
  });
});
