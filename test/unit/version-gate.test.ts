import { DataVersions, formatMinor, gateRefusal, gateScript, minorOf, versionGate } from '../../agent/prepare/version-gate';

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
  ])('when the data records %s, then etcd %s may run it', (_what, versions, range) => {
    const gate = versionGate(versions);
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

describe('gateScript: the shell lines of the flags file', () => {
  const lines = gateScript(versionGate(V37)!, "/run/it's/note");

  it('when rendered, then it compares ranks of the gate and carries both refusals with the version left to the shell', () => {
    const script = lines.join('\n');
    expect(script).toContain('-lt 30007 ]');
    expect(script).toContain('-gt 30008 ]');
    expect(script).toContain(`etcd_agent_refusal='etcd '"$etcd_agent_version"' cannot run data written by 3.7; upgrade the image or restore'`);
    expect(script).toContain('exit 1');
  });

  it('when the note path holds a quote, then it is quoted for the shell', () => {
    expect(lines.join('\n')).toContain(`> '/run/it'\\''s/note'`);
  });

  it('when there is no note file, then nothing is written but stderr and the termination log', () => {
    const script = gateScript(versionGate(V37)!, undefined).join('\n');
    expect(script).not.toContain(': >');
    expect(script).toContain('/dev/termination-log');
  });
});
