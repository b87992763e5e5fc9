import { HostNetworkAnswer, hostNetworkSetting, HostNetworkSetting, resolveHostNetwork } from '../../agent/config/host-network';

describe('resolveHostNetwork', () => {
  // [setting, POD_IP, HOST_IP, expected answer (hostNetwork, or 'conflict')]
  it.each<[HostNetworkSetting, string | undefined, string | undefined, boolean | 'conflict']>([
    ['true', undefined, undefined, true],
    ['true', '10.244.1.7', '10.0.0.5', true],
    ['true', '10.0.0.5', '10.0.0.5', true],
    ['false', undefined, undefined, false],
    ['false', '10.244.1.7', '10.0.0.5', false],
    ['false', '10.0.0.5', '10.0.0.5', 'conflict'],
    ['auto', '10.0.0.5', '10.0.0.5', true],
    ['auto', 'fd00::5', 'FD00::5', true],
    ['auto', ' 10.0.0.5 ', '10.0.0.5', true],
    ['auto', '10.244.1.7', '10.0.0.5', false],
    ['auto', '10.0.0.5', undefined, false],
    ['auto', undefined, '10.0.0.5', false],
    ['auto', '', '', false],
    ['auto', undefined, undefined, false],
  ])('when the setting is %p, POD_IP %p and HOST_IP %p, then host network is %p', (setting, podIp, hostIp, expected) => {
    const answer: HostNetworkAnswer = resolveHostNetwork({ setting, podIp, hostIp });
    if (expected === 'conflict') {
      expect(answer).toEqual({ conflict: expect.stringContaining('POD_IP equals HOST_IP') });
    } else {
      expect(answer).toEqual({ hostNetwork: expected, reason: expect.any(String) });
    }
  });

  it('when host network is told by the addresses, then the reason names them', () => {
    expect(resolveHostNetwork({ setting: 'auto', podIp: '10.0.0.5', hostIp: '10.0.0.5' })).toEqual({
      hostNetwork: true,
      reason: 'POD_IP equals HOST_IP (10.0.0.5)',
    });
  });
});

describe('hostNetworkSetting', () => {
  it.each<[string, HostNetworkSetting | undefined]>([
    ['auto', 'auto'],
    ['AUTO', 'auto'],
    ['true', 'true'],
    ['Yes', 'true'],
    ['1', 'true'],
    ['false', 'false'],
    ['no', 'false'],
    ['0', 'false'],
    ['host', undefined],
    ['', undefined],
  ])('when the value is %p, then the setting is %p', (value, expected) => {
    expect(hostNetworkSetting(value)).toBe(expected);
  });
});
