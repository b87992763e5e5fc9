import { decideOrigin, type OriginVerdict } from '../../agent/backup/origin-decision';
import type { RestoreMember } from '../../agent/backup/restore-decision';
import type { Manifest } from '../../agent/proto/backup';

const initial: RestoreMember[] = ['etcd-0', 'etcd-1', 'etcd-2'].map((name) => ({ name, peerURL: `http://${name}.etcd-headless:2380` }));
const member = (name: string, ...peerURLs: string[]): { name: string; peerURLs: string[] } => ({
  name,
  peerURLs: peerURLs.length > 0 ? peerURLs : [`http://${name}.etcd-headless:2380`],
});
const backup = (members?: { name: string; peerURLs: string[] }[]): Pick<Manifest, 'name' | 'clusterId' | 'members'> => ({
  name: '20261204T230000.123Z-1a2b3c',
  clusterId: 'cdf818194e3a8c32',
  ...(members === undefined ? {} : { members }),
});

describe('decideOrigin', () => {
  it.each<[string, Pick<Manifest, 'name' | 'clusterId' | 'members'>, boolean, OriginVerdict['kind'], string]>([
    ['the backup holds the same members', backup([member('etcd-0'), member('etcd-1'), member('etcd-2')]), false, 'same-cluster', 'etcd-0'],
    [
      'one member of the backup is an initial member, the others were replaced since',
      backup([member('etcd-5'), member('etcd-6'), member('etcd-2')]),
      false,
      'same-cluster',
      'etcd-2',
    ],
    [
      'a member has several peer URLs, one of them the initial one',
      backup([member('etcd-1', 'http://10.0.0.7:2380', 'http://etcd-1.etcd-headless:2380')]),
      false,
      'same-cluster',
      'etcd-1',
    ],
    [
      'the peer URL differs only in spelling (host case, default path)',
      backup([member('etcd-1', 'http://ETCD-1.etcd-headless:2380/')]),
      false,
      'same-cluster',
      'etcd-1',
    ],
    [
      'the names match but not the peer URLs (another namespace)',
      backup([member('etcd-0', 'http://etcd-0.etcd-headless.other.svc:2380')]),
      false,
      'refused',
      'backup 20261204T230000.123Z-1a2b3c of cluster cdf818194e3a8c32 was taken of members etcd-0=http://etcd-0.etcd-headless.other.svc:2380; none is an initial member of this pod',
    ],
    [
      'a peer URL matches under another name',
      backup([member('orders-0', 'http://etcd-0.etcd-headless:2380')]),
      false,
      'refused',
      'was taken of members orders-0=http://etcd-0.etcd-headless:2380',
    ],
    [
      'only an unstarted member of the backup has the peer URL',
      backup([member('', 'http://etcd-0.etcd-headless:2380')]),
      false,
      'refused',
      '(unstarted)=http://etcd-0.etcd-headless:2380',
    ],
    ['the manifest records no members', backup(), false, 'refused', 'records no members (an older agent took it)'],
    ['the manifest records an empty list', backup([]), false, 'refused', 'records no members'],
    [
      "another cluster's backup, forced",
      backup([member('orders-0', 'http://orders-0:2380')]),
      true,
      'forced',
      'restored all the same, as ETCD_AGENT_RESTORE_FORCE asks',
    ],
    ['no members recorded, forced', backup(), true, 'forced', 'ETCD_AGENT_RESTORE_FORCE'],
    ['the same cluster, forced: force changes nothing', backup([member('etcd-0')]), true, 'same-cluster', 'etcd-0'],
  ])('when %s, then it is %s', (_what, manifest, force, kind, said) => {
    const verdict = decideOrigin(manifest, initial, force);
    expect(verdict.kind).toBe(kind);
    expect(verdict.kind === 'same-cluster' ? verdict.member : verdict.reason).toContain(said);
  });

  it('when refused, then the reason names the backup, its cluster id, its members, this pod’s initial members and the override', () => {
    const verdict = decideOrigin(
      backup([member('orders-0', 'http://orders-0:2380'), member('orders-1', 'http://orders-1:2380')]),
      initial,
      false,
    );
    expect(verdict).toEqual({
      kind: 'refused',
      reason:
        'backup 20261204T230000.123Z-1a2b3c of cluster cdf818194e3a8c32 was taken of members orders-0=http://orders-0:2380, orders-1=http://orders-1:2380; ' +
        'none is an initial member of this pod (etcd-0=http://etcd-0.etcd-headless:2380, etcd-1=http://etcd-1.etcd-headless:2380, etcd-2=http://etcd-2.etcd-headless:2380): ' +
        "not restoring another cluster's backup; set ETCD_AGENT_RESTORE_FORCE=true if it is meant",
    });
  });
});
