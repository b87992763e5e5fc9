import { mountPoints } from '../../agent/lib/mount-points';

describe('mountPoints', () => {
  it.each<[string, string, string[]]>([
    [
      'a root and a volume',
      '26 1 0:22 / / rw - overlay overlay rw\n812 26 8:1 /pvc /var/run/etcd rw,relatime - ext4 /dev/sda1 rw\n',
      ['/', '/var/run/etcd'],
    ],
    [
      'optional fields before the separator',
      '90 26 0:45 / /var/run/etcd/default.etcd rw,relatime shared:12 master:3 - tmpfs tmpfs rw,size=1024k\n',
      ['/var/run/etcd/default.etcd'],
    ],
    ['a space written as \\040', '91 26 0:46 / /mnt/etcd\\040data rw - tmpfs tmpfs rw\n', ['/mnt/etcd data']],
    ['a backslash written as \\134', '92 26 0:47 / /mnt/a\\134b rw - tmpfs tmpfs rw\n', ['/mnt/a\\b']],
    ['an empty table (not Linux, or unreadable)', '', []],
    ['a line cut short', '93 26 0:48 /\n', []],
  ])('when the table holds %s, then the mount points are %j', (_case, text, points) => {
    expect([...mountPoints(text)]).toEqual(points);
  });
});
