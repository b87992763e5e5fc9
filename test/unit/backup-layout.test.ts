import {
  isBackupName,
  manifestBytes,
  manifestKey,
  newBackupName,
  parseManifest,
  snapshotKey,
  sortListing,
  verificationState,
} from '../../agent/backup/layout';
import type { StoredObject } from '../../agent/backup/store';
import type { Manifest } from '../../agent/proto/backup';

const A = '20261204T230000.123Z-1a2b3c';
const B = '20261205T010000.000Z-00ff00';
const C = '20261205T020000.000Z-abcdef';

const object = (key: string, sizeBytes = 100): StoredObject => ({ key, sizeBytes, modifiedAt: new Date('2026-12-05T00:00:00Z') });

/** The listing as names: each pair's name with its snapshot's size, and each orphan's key. */
function shown(objects: StoredObject[]): { paired: string[]; orphans: string[] } {
  const listing = sortListing(objects);
  return { paired: listing.paired.map((p) => `${p.name} ${p.snapshot.sizeBytes}`), orphans: listing.orphans.map((o) => o.key) };
}

describe('sortListing', () => {
  it.each<[string, StoredObject[], { paired: string[]; orphans: string[] }]>([
    ['an empty store', [], { paired: [], orphans: [] }],
    ['one whole backup', [object(snapshotKey(A), 7), object(manifestKey(A), 1)], { paired: [`${A} 7`], orphans: [] }],
    ['a snapshot without its manifest is an orphan', [object(snapshotKey(A))], { paired: [], orphans: [snapshotKey(A)] }],
    [
      'a manifest without its snapshot (a verification crossing its removal) is an orphan',
      [object(manifestKey(A))],
      { paired: [], orphans: [manifestKey(A)] },
    ],
    [
      'names sort by time whatever the listing order',
      [
        object(manifestKey(C)),
        object(snapshotKey(C), 3),
        object(snapshotKey(A), 1),
        object(manifestKey(B)),
        object(snapshotKey(B), 2),
        object(manifestKey(A)),
      ],
      { paired: [`${A} 1`, `${B} 2`, `${C} 3`], orphans: [] },
    ],
    [
      'pairs and orphans side by side, each oldest first',
      [object(snapshotKey(C)), object(snapshotKey(B), 2), object(manifestKey(B)), object(snapshotKey(A))],
      { paired: [`${B} 2`], orphans: [snapshotKey(A), snapshotKey(C)] },
    ],
    [
      'orphans of both kinds, oldest first',
      [object(snapshotKey(C)), object(manifestKey(A)), object(snapshotKey(B), 2), object(manifestKey(B))],
      { paired: [`${B} 2`], orphans: [manifestKey(A), snapshotKey(C)] },
    ],
    [
      'what is not a backup is left out: other names, other files, nested keys, top-level keys',
      [
        object('notes/snapshot.db'),
        object('20261204T230000Z-1a2b3c/snapshot.db'),
        object(`${A}/snapshot.db.partial-12-1`),
        object(`${A}/sub/snapshot.db`),
        object(`${A}/extra.json`),
        object('snapshot.db'),
        object(A),
      ],
      { paired: [], orphans: [] },
    ],
  ])('%s', (_case, objects, expected) => {
    expect(shown(objects)).toEqual(expected);
  });
});

describe('backup names', () => {
  it('when a name is made from a time, then it sorts by that time and is one', () => {
    const earlier = newBackupName(new Date('2026-12-04T23:00:00.123Z'));
    const later = newBackupName(new Date('2026-12-05T01:00:00.000Z'));
    expect(earlier).toMatch(/^20261204T230000\.123Z-[0-9a-f]{6}$/);
    expect(isBackupName(earlier) && isBackupName(later)).toBe(true);
    expect([later, earlier].sort()).toEqual([earlier, later]);
  });

  it.each<[string, boolean]>([
    [A, true],
    ['20261204T230000.123Z-1A2B3C', false],
    ['20261204T230000Z-1a2b3c', false],
    ['20261204T230000.123Z', false],
    [`../${A}`, false],
    [`${A}/snapshot.db`, false],
    ['', false],
  ])('%j is a backup name: %s', (name, is) => {
    expect(isBackupName(name)).toBe(is);
  });
});

const manifest: Manifest = {
  format: 1,
  name: A,
  clusterId: 'cdf818194e3a8c32',
  revision: 42,
  etcdVersion: '3.6.16',
  member: { id: '8e9e05c52164694d', name: 'etcd-0', clientURL: 'http://127.0.0.1:2379' },
  agent: 'etcd-0',
  sizeBytes: 20_480,
  sha256: 'a'.repeat(64),
  startedAt: '2026-12-04T23:00:00.123Z',
  finishedAt: '2026-12-04T23:00:01.000Z',
  durationMs: 877,
};
const verified: Manifest = {
  ...manifest,
  verification: { ok: true, verifiedAt: '2026-12-04T23:01:00.000Z', durationMs: 900, revision: 42, keys: 10, tool: 'etcdutl 3.6.16' },
};
const failed: Manifest = {
  ...manifest,
  verification: { ok: false, verifiedAt: '2026-12-04T23:01:00.000Z', durationMs: 30, check: 'sha256', error: 'the sha256 differs' },
};
const bytes = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));

describe('parseManifest', () => {
  it.each<[string, Manifest]>([
    ['an unverified manifest', manifest],
    ['a verified one', verified],
    ['one whose verification failed', failed],
  ])('%s reads back as it was stored', (_case, stored) => {
    expect(parseManifest(manifestBytes(stored), stored.name)).toEqual(stored);
  });

  it.each<[string, Buffer, string]>([
    ['not JSON', Buffer.from('{"format":1,'), 'its manifest is not JSON ('],
    ['empty', Buffer.alloc(0), 'its manifest is not JSON ('],
    ['JSON but no object', bytes([1, 2]), 'its manifest is not one: '],
    ['another format', bytes({ ...manifest, format: 2 }), 'its manifest is not one: format'],
    ['a field missing', bytes({ ...manifest, sha256: undefined }), 'its manifest is not one: sha256'],
    ['a sha256 that is not one', bytes({ ...manifest, sha256: 'abc' }), 'its manifest is not one: sha256'],
    ['a negative size', bytes({ ...manifest, sizeBytes: -1 }), 'its manifest is not one: sizeBytes'],
    ['a field it does not know', bytes({ ...manifest, extra: true }), 'its manifest is not one: '],
    [
      'a verification missing its check',
      bytes({ ...failed, verification: { ...failed.verification, check: undefined } }),
      'its manifest is not one: verification',
    ],
    ["another backup's", bytes({ ...manifest, name: B }), `its manifest names another backup (${B})`],
  ])('%s: %s', (_case, stored, why) => {
    const answer = parseManifest(stored, A);
    expect(typeof answer).toBe('string');
    expect(answer).toContain(why);
  });
});

describe('verificationState', () => {
  it.each<[string, string, Manifest]>([
    ['no verification record', 'unverified', manifest],
    ['a record that passed', 'verified', verified],
    ['a record that failed', 'failed', failed],
  ])('%s: %s', (_case, state, stored) => {
    expect(verificationState(stored)).toBe(state);
  });
});
