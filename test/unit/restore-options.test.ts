import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '../../agent/config/config';
import { loadPrepareOptions } from '../../agent/prepare/options';
import { thrownBy } from '../helpers/thrown';

describe("prepare's restore options", () => {
  const volume = fs.mkdtempSync(path.join(os.tmpdir(), 'restore-options-'));
  afterAll(() => fs.rmSync(volume, { recursive: true, force: true }));
  const base = {
    ETCD_AGENT_MEMBER_NAME: 'etcd-0',
    ETCD_AGENT_DATA_DIR: path.join(volume, 'default.etcd'),
    ETCD_AGENT_PEER_URL_TEMPLATE: 'http://{name}.svc:2380',
    ETCD_AGENT_INITIAL_CLUSTER: 'etcd-0=http://etcd-0.svc:2380,etcd-1=http://etcd-1.svc:2380',
  };
  const name = '20261204T230000.123Z-1a2b3c';

  it('when no restore is asked, then the options have none', () => {
    expect(loadPrepareOptions(base, []).restore).toBeUndefined();
  });

  it.each<[string, Record<string, string>, string[], object]>([
    [
      'a directory store',
      { ETCD_AGENT_RESTORE_FROM: '/backups/etcd' },
      [],
      { source: 'file:///backups/etcd', unverified: false, force: false },
    ],
    ['the same directory as a file URL', { ETCD_AGENT_RESTORE_FROM: 'file:///backups/etcd/' }, [], { source: 'file:///backups/etcd' }],
    [
      'an S3 store with an endpoint',
      { ETCD_AGENT_RESTORE_FROM: 's3://etcd-backups/prod?endpoint=http://10.0.0.1:7070' },
      [],
      { source: 's3://etcd-backups/prod/?endpoint=http://10.0.0.1:7070&path-style=true', location: { kind: 's3', bucket: 'etcd-backups' } },
    ],
    ['a backup by name', { ETCD_AGENT_RESTORE_FROM: '/b', ETCD_AGENT_RESTORE_BACKUP: name }, [], { backup: name }],
    ['unverified allowed', { ETCD_AGENT_RESTORE_FROM: '/b', ETCD_AGENT_RESTORE_UNVERIFIED: 'true' }, [], { unverified: true }],
    [
      'the flags',
      {},
      ['--restore-from', '/b', '--restore-backup', name, '--restore-unverified'],
      { source: 'file:///b', backup: name, unverified: true },
    ],
    ['a bare unverified flag before another', {}, ['--restore-unverified', '--restore-from=/b'], { unverified: true }],
    ["another cluster's backup allowed", { ETCD_AGENT_RESTORE_FROM: '/b', ETCD_AGENT_RESTORE_FORCE: 'true' }, [], { force: true }],
    ['a bare force flag', {}, ['--restore-from=/b', '--restore-force'], { force: true }],
    ['the force flag set false', { ETCD_AGENT_RESTORE_FORCE: 'true' }, ['--restore-from=/b', '--restore-force=false'], { force: false }],
    [
      'unverified flag set false',
      { ETCD_AGENT_RESTORE_UNVERIFIED: 'true' },
      ['--restore-from=/b', '--restore-unverified=false'],
      { unverified: false },
    ],
    ['the restore tool', { ETCD_AGENT_RESTORE_FROM: '/b', ETCD_AGENT_ETCDUTL: '/opt/etcd/etcdutl' }, [], { tool: '/opt/etcd/etcdutl' }],
  ])('when given %s, then the restore reads as asked', (_what, env, argv, expected) => {
    expect(loadPrepareOptions({ ...base, ...env }, argv).restore).toMatchObject(expected);
  });

  it("when the sidecar loads prepare's options, then it has no restore: only the init container restores", () => {
    expect(loadPrepareOptions({ ...base, ETCD_AGENT_RESTORE_FROM: '/b' }, [], true).restore).toBeUndefined();
  });

  it.each<[string, Record<string, string>, string[], string, string]>([
    ['a store URL of another scheme', { ETCD_AGENT_RESTORE_FROM: 'http://x/y' }, [], 'ETCD_AGENT_RESTORE_FROM', 's3:// or file://'],
    ['a relative path', { ETCD_AGENT_RESTORE_FROM: 'backups' }, [], 'ETCD_AGENT_RESTORE_FROM', 'neither'],
    [
      'a backup name of another form',
      { ETCD_AGENT_RESTORE_FROM: '/b', ETCD_AGENT_RESTORE_BACKUP: 'latest' },
      [],
      'ETCD_AGENT_RESTORE_BACKUP',
      'not a backup name',
    ],
    ['a backup without a store', { ETCD_AGENT_RESTORE_BACKUP: name }, [], 'ETCD_AGENT_RESTORE_BACKUP', 'needs ETCD_AGENT_RESTORE_FROM'],
    ['unverified without a store', {}, ['--restore-unverified'], 'ETCD_AGENT_RESTORE_UNVERIFIED', 'needs ETCD_AGENT_RESTORE_FROM'],
    ['force without a store', { ETCD_AGENT_RESTORE_FORCE: 'true' }, [], 'ETCD_AGENT_RESTORE_FORCE', 'needs ETCD_AGENT_RESTORE_FROM'],
    [
      'force that is not a boolean',
      { ETCD_AGENT_RESTORE_FROM: '/b', ETCD_AGENT_RESTORE_FORCE: 'please' },
      [],
      'ETCD_AGENT_RESTORE_FORCE',
      'not a boolean',
    ],
    [
      'unverified that is not a boolean',
      { ETCD_AGENT_RESTORE_FROM: '/b', ETCD_AGENT_RESTORE_UNVERIFIED: 'maybe' },
      [],
      'ETCD_AGENT_RESTORE_UNVERIFIED',
      'not a boolean',
    ],
    [
      'a restore without an initial cluster',
      { ETCD_AGENT_RESTORE_FROM: '/b', ETCD_AGENT_INITIAL_CLUSTER: '' },
      [],
      'ETCD_AGENT_RESTORE_FROM',
      'needs ETCD_AGENT_INITIAL_CLUSTER',
    ],
  ])('when given %s, then a ConfigError names its variable and says why', (_what, env, argv, variable, message) => {
    const thrown = thrownBy(() => loadPrepareOptions({ ...base, ...env }, argv));
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).variable).toBe(variable);
    expect((thrown as ConfigError).message).toContain(message);
  });
});
