import { DataVersions, formatMinor, gateLines, gateRefusal, minorOf, versionGate } from '../../agent/prepare/version-gate';
import { isV2Request } from '../../agent/etcd-data/wal-scan';

const V34: DataVersions = { cluster: '3.4.0' };
const V35: DataVersions = { cluster: '3.5.0' };
const V36: DataVersions = { storage: '3.6.0', cluster: '3.6.0' };
const V37: DataVersions = { storage: '3.7.0', cluster: '3.7.0' };

describe('versionGate: which etcd minors may start on a data directory', () => {
  it.each<[string, DataVersions, string | undefined]>([
    ['nothing recorded (no backend yet, or one etcd never wrote)', {}, undefined],
    ['an unreadable version alone', { storage: 'x' }, undefined],
    ['3.4 data (cluster version only)', V34, '3.4 to 3.5'],
    ['3.5 data (cluster version only)', V35, '3.5 to 3.6'],
    ['3.6 data', V36, '3.6 to 3.7'],
    ['3.7 data', V37, '3.7 to 3.8'],
    ['a member on 3.7 whose cluster still runs 3.6 (may go back)', { storage: '3.6.0', cluster: '3.6.0' }, '3.6 to 3.7'],
    ['a storage version behind the cluster version', { storage: '3.6.0', cluster: '3.7.0' }, '3.7 to 3.7'],
    ['an unreadable storage version beside a cluster version', { storage: 'garbage', cluster: '3.5.0' }, '3.5 to 3.6'],
    ["etcd's bootstrap placeholder alone (cluster version 3.0.0, not decided yet)", { cluster: '3.0.0' }, undefined],
    ['a storage version beside the bootstrap placeholder', { storage: '3.6.0', cluster: '3.0.0' }, '3.6 to 3.7'],
  ])('when the data records %s, then etcd %s may run it', (_what, versions, range) => {
    const gate = versionGate(versions);
    expect(gate === undefined ? undefined : `${formatMinor(gate.oldest)} to ${formatMinor(gate.newest)}`).toBe(range);
  });

  it.each<[string, DataVersions, number, string]>([
    ['3.6 data whose log still holds 3.5 requests', V36, 3, '3.6 to 3.6'],
    ['3.6 data whose log holds none', V36, 0, '3.6 to 3.7'],
    ['3.5 data whose log holds 3.5 requests', V35, 2, '3.5 to 3.6'],
    ['3.7 data (cannot hold any: 3.7 started on it)', V37, 0, '3.7 to 3.8'],
  ])('when %s, then etcd %s may run it', (_what, versions, v2Entries, range) => {
    const gate = versionGate(versions, v2Entries);
    expect(gate === undefined ? undefined : `${formatMinor(gate.oldest)} to ${formatMinor(gate.newest)}`).toBe(range);
  });
});

describe('gateRefusal: the one line the start script gives an etcd the gate refuses', () => {
  it.each<[string, DataVersions, string, string | undefined]>([
    ['3.7 data', V37, '3.5.35', 'etcd 3.5.35 cannot run data written by 3.7; upgrade the image or restore'],
    ['3.7 data', V37, '3.6.16', 'etcd 3.6.16 cannot run data written by 3.7; upgrade the image or restore'],
    ['3.7 data', V37, '3.4.23', 'etcd 3.4.23 cannot run data written by 3.7; upgrade the image or restore'],
    ['3.7 data', V37, '3.7.3', undefined],
    ['3.7 data', V37, '3.8.0', undefined],
    ['3.6 data', V36, '3.5.35', 'etcd 3.5.35 cannot run data written by 3.6; upgrade the image or restore'],
    ['3.6 data', V36, '3.6.16', undefined],
    ['3.6 data', V36, '3.7.3', undefined],
    ['3.5 data', V35, '3.4.23', 'etcd 3.4.23 cannot run data written by 3.5; upgrade the image or restore'],
    ['3.5 data', V35, '3.5.35', undefined],
    ['3.5 data', V35, '3.6.16', undefined],
    ['3.5 data', V35, '3.7.3', 'etcd 3.7.3 cannot run data written by 3.5: upgrade one minor version at a time (3.6 first)'],
    ['3.4 data', V34, '3.6.16', 'etcd 3.6.16 cannot run data written by 3.4: upgrade one minor version at a time (3.5 first)'],
    ['3.7 data', V37, '', undefined],
    ['3.7 data', V37, 'not a version', undefined],
  ])('when %s meets etcd %s, then the start script says %s', (_what, versions, etcd, refusal) => {
    const gate = versionGate(versions);
    if (gate === undefined) throw new Error('no gate');
    expect(gateRefusal(gate, etcd)).toBe(refusal);
  });

  it.each<[string, DataVersions, string, string | undefined]>([
    [
      '3.6 data with 3 requests of 3.5 in its log',
      V36,
      '3.7.3',
      "etcd 3.7.3 cannot replay the 3 requests etcd 3.5 left in this member's write-ahead log: run etcd 3.6 until it takes a snapshot (restart it once with --snapshot-count=1), then upgrade",
    ],
    ['3.6 data with 3 requests of 3.5 in its log', V36, '3.6.16', undefined],
    [
      '3.5 data with 3 requests of 3.5 in its log',
      V35,
      '3.7.3',
      'etcd 3.7.3 cannot run data written by 3.5: upgrade one minor version at a time (3.6 first)',
    ],
  ])('when %s meets etcd %s, then the start script says %s', (_what, versions, etcd, refusal) => {
    const gate = versionGate(versions, 3);
    if (gate === undefined) throw new Error('no gate');
    expect(gateRefusal(gate, etcd)).toBe(refusal);
  });
});

describe('minorOf', () => {
  it.each<[string, string | undefined]>([
    ['3.6.16', '3.6'],
    ['v3.5.0', '3.5'],
    ['3.10', '3.10'],
    ['3', undefined],
    ['', undefined],
    ['3.x.1', undefined],
  ])('when the version is %j, then its minor is %s', (version, minor) => {
    const parsed = minorOf(version);
    expect(parsed === undefined ? undefined : formatMinor(parsed)).toBe(minor);
  });
});

describe('gateLines: the gate as data lines of the flags file', () => {
  const lines = gateLines(versionGate(V37)!);

  it('when rendered, then it carries the ranks of the gate and both refusals with the version left to the start script, all as comments', () => {
    expect(lines.every((l) => l.startsWith('#'))).toBe(true);
    expect(lines).toContain('#etcd-version-gate 30007 30008');
    expect(lines).toContain('#etcd-version-too-old etcd {version} cannot run data written by 3.7; upgrade the image or restore');
    expect(lines.filter((l) => l.startsWith('#etcd-version-too-new etcd {version} '))).toHaveLength(1);
  });
});

describe('isV2Request: what etcd 3.7 cannot replay', () => {
  /** Protobuf: a varint field, a length-delimited field. */
  const varint = (field: number, value: number): number[] => [(field << 3) | 0, value];
  const bytes = (field: number, payload: number[]): number[] => [(field << 3) | 2, payload.length, ...payload];
  const ascii = (text: string): number[] => [...Buffer.from(text)];

  it.each<[string, number[], boolean]>([
    [
      "a v2 request (3.5's publish: ID, method PUT, path)",
      [...varint(1, 7), ...bytes(2, ascii('PUT')), ...bytes(3, ascii('/0/members/1/attributes'))],
      true,
    ],
    ['a v2 request with method QGET', [...varint(1, 7), ...bytes(2, ascii('QGET'))], true],
    [
      'an InternalRaftRequest with a put (field 4)',
      [...varint(1, 7), ...bytes(4, [...bytes(1, ascii('k')), ...bytes(2, ascii('v'))])],
      false,
    ],
    [
      'an InternalRaftRequest carrying a v2 request in field 2',
      [...varint(1, 7), ...bytes(2, [...varint(1, 7), ...bytes(2, ascii('PUT'))])],
      false,
    ],
    ['a field 2 of other text', [...varint(1, 7), ...bytes(2, ascii('put'))], false],
    ['no protobuf at all', [0xff, 0xff, 0xff], false],
    ['nothing', [], false],
  ])('when the entry is %s, then it is a v2 request: %s', (_what, data, v2) => {
    expect(isV2Request(Buffer.from(data))).toBe(v2);
  });
});
