import { describeLocation, parseLocation, type StoreLocation } from '../../agent/backup/location';
import { hideUserInfo } from '../../agent/proto/store-location';
import { AgentError } from '../../agent/proto/errors';
import { thrownBy } from '../helpers/thrown';

describe('parseLocation', () => {
  it.each<[string, string, StoreLocation]>([
    ['a bare absolute path', '/var/lib/etcd-backups', { kind: 'dir', path: '/var/lib/etcd-backups' }],
    ['a bare path with dots and a trailing slash, normalized', '/var/lib/../backups/', { kind: 'dir', path: '/var/backups' }],
    ['a file URL', 'file:///var/lib/etcd-backups', { kind: 'dir', path: '/var/lib/etcd-backups' }],
    ['a file URL with an escaped space', 'file:///mnt/etcd%20backups', { kind: 'dir', path: '/mnt/etcd backups' }],
    ['surrounding blanks', '  /backups \n', { kind: 'dir', path: '/backups' }],
    ['an AWS bucket without a prefix', 's3://etcd-backups', { kind: 's3', bucket: 'etcd-backups', prefix: '', pathStyle: false }],
    ['an AWS bucket and a bare slash', 's3://etcd-backups/', { kind: 's3', bucket: 'etcd-backups', prefix: '', pathStyle: false }],
    [
      'an AWS bucket, a nested prefix and a region',
      's3://etcd-backups/prod/orders?region=eu-west-1',
      { kind: 's3', bucket: 'etcd-backups', prefix: 'prod/orders/', region: 'eu-west-1', pathStyle: false },
    ],
    [
      'the prefix loses its slashes at both ends',
      's3://etcd-backups//prod/orders//',
      { kind: 's3', bucket: 'etcd-backups', prefix: 'prod/orders/', pathStyle: false },
    ],
    [
      'an escaped prefix is decoded',
      's3://etcd-backups/team%20a',
      { kind: 's3', bucket: 'etcd-backups', prefix: 'team a/', pathStyle: false },
    ],
    [
      'an endpoint implies path-style',
      's3://backups/cluster-a?endpoint=http://127.0.0.1:7070&region=us-east-1',
      { kind: 's3', bucket: 'backups', prefix: 'cluster-a/', endpoint: 'http://127.0.0.1:7070', region: 'us-east-1', pathStyle: true },
    ],
    [
      "the endpoint's trailing slash is dropped",
      's3://backups?endpoint=https://minio.example:9000/',
      { kind: 's3', bucket: 'backups', prefix: '', endpoint: 'https://minio.example:9000', pathStyle: true },
    ],
    [
      'path-style=false overrides the endpoint',
      's3://backups?endpoint=https://s3.example&path-style=false',
      { kind: 's3', bucket: 'backups', prefix: '', endpoint: 'https://s3.example', pathStyle: false },
    ],
    [
      'path-style=true without an endpoint',
      's3://backups.example.com/x?path-style=true',
      { kind: 's3', bucket: 'backups.example.com', prefix: 'x/', pathStyle: true },
    ],
  ])('%s: %j', (_case, text, expected) => {
    expect(parseLocation(text)).toEqual(expected);
  });

  it.each<[string, string, string]>([
    ['a relative path', 'backups', 'is neither s3://bucket/prefix nor file:///path nor an absolute path'],
    ['an empty string', '   ', 'is neither s3://bucket/prefix nor file:///path nor an absolute path'],
    ['another scheme', 'gs://bucket/prefix', 'must start with s3:// or file://'],
    ['an http URL', 'http://127.0.0.1:7070/backups', 'must start with s3:// or file://'],
    ['a file URL with a host', 'file://host/var/backups', 'without a host or a query'],
    ['a file URL with a query', 'file:///var/backups?x=1', 'without a host or a query'],
    ['credentials in the URL', 's3://AKIAEXAMPLE:secret@backups/x', 'must not hold credentials'],
    ['a bucket too short', 's3://ab/x', 'which is not a valid bucket name'],
    ['a bucket in capitals', 's3://Backups/x', 'which is not a valid bucket name'],
    ['a bucket with an underscore', 's3://etcd_backups/x', 'which is not a valid bucket name'],
    ['a bucket ending in a dash', 's3://backups-/x', 'which is not a valid bucket name'],
    ['a port on the bucket', 's3://backups:7070/x', 'names a port'],
    ['an unknown option', 's3://backups?endpoint=http://h:1&secret=x', 'has the unknown option "secret"'],
    ['an endpoint with a path', 's3://backups?endpoint=http://h:9000/bucket', 'has an endpoint that is not http(s)://host[:port]'],
    ['an endpoint with a query', 's3://backups?endpoint=http://h:9000?x=1', 'has an endpoint that is not http(s)://host[:port]'],
    [
      'an escaped endpoint with a query',
      's3://backups?endpoint=http%3A%2F%2Fh%3A9000%2F%3Fx%3D1',
      'has an endpoint that is not http(s)://host[:port]',
    ],
    ['an endpoint with a fragment', 's3://backups?endpoint=http://h:9000%23f', 'has an endpoint that is not http(s)://host[:port]'],
    ['an endpoint of another scheme', 's3://backups?endpoint=ftp://h:21', 'has an endpoint that is not http(s)://host[:port]'],
    ['an empty endpoint', 's3://backups?endpoint=', 'has an endpoint that is not http(s)://host[:port]'],
    ['a user name in the endpoint', 's3://backups?endpoint=https://AKIAEXAMPLE@h:9000', 'has an endpoint that holds credentials'],
    ['an empty region', 's3://backups?region=', 'has a region that is not one'],
    ['a region with blanks', 's3://backups?region=us%20east', 'has a region that is not one'],
    ['a malformed escape in a prefix', 's3://backups/a%zz', 'has a malformed %-escape in its path'],
    ['a malformed escape in a file URL', 'file:///var/a%zz', 'has a malformed %-escape in its path'],
    ['path-style neither true nor false', 's3://backups?path-style=yes', 'has path-style that is neither true nor false'],
  ])('%s (%j) is refused: %s', (_case, text, why) => {
    const thrown = thrownBy(() => parseLocation(text, 'ETCD_AGENT_BACKUP_STORE'));
    expect(thrown).toBeInstanceOf(AgentError);
    expect((thrown as AgentError).code).toBe('bad-request');
    expect((thrown as AgentError).message).toContain(`ETCD_AGENT_BACKUP_STORE: "${hideUserInfo(text.trim())}"`);
    expect((thrown as AgentError).message).toContain(why);
  });
});

describe('parseLocation and credentials', () => {
  it.each<[string, string]>([
    ['credentials in the URL', 's3://AKIAEXAMPLE:s3cr3t-value@backups/x'],
    ['credentials in the endpoint', 's3://backups/x?endpoint=https://AKIAEXAMPLE:s3cr3t-value@minio.example:9000'],
    ['credentials in an escaped endpoint', 's3://backups/x?endpoint=https%3A%2F%2FAKIAEXAMPLE%3As3cr3t-value%40minio.example%3A9000'],
    ['credentials in the endpoint, among other options', 's3://backups/x?region=us-east-1&endpoint=http://AKIAEXAMPLE:s3cr3t-value@h:1'],
    ['credentials in an endpoint with a path', 's3://backups/x?endpoint=https://AKIAEXAMPLE:s3cr3t-value@h:9000/p'],
  ])('when a store URL holds %s, then it is refused, and the refusal names neither the key nor the secret', (_case, text) => {
    const thrown = thrownBy(() => parseLocation(text, 'ETCD_AGENT_BACKUP_STORE'));
    expect(thrown).toBeInstanceOf(AgentError);
    expect((thrown as AgentError).message).toMatch(/credentials/);
    expect((thrown as AgentError).message).not.toMatch(/s3cr3t|AKIAEXAMPLE/);
  });
});

describe('hideUserInfo', () => {
  it.each<[string, string]>([
    ['s3://KEY:SECRET@bucket/x', 's3://***@bucket/x'],
    ['s3://b?endpoint=https://KEY:SECRET@h:9000&region=r', 's3://b?endpoint=https://***@h:9000&region=r'],
    ['s3://b?endpoint=https%3A%2F%2FKEY%3ASECRET%40h', 's3://b?endpoint=https%3A%2F%2F***%40h'],
    ['s3://bucket/a@b?endpoint=http://h:1', 's3://bucket/a@b?endpoint=http://h:1'],
    ['/backups', '/backups'],
  ])('%s is quoted as %s', (text, shown) => {
    expect(hideUserInfo(text)).toBe(shown);
  });
});

describe('describeLocation', () => {
  it.each<[string, string]>([
    ['/var/backups', 'directory /var/backups'],
    ['s3://etcd-backups/prod', 's3://etcd-backups/prod/'],
    ['s3://backups/a?endpoint=http://127.0.0.1:7070', 's3://backups/a/ at http://127.0.0.1:7070'],
  ])('%s is shown as %s', (text, shown) => {
    expect(describeLocation(parseLocation(text))).toBe(shown);
  });
});
