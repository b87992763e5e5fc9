import type { ListedMember } from '../helpers/etcd-cluster';
import { QuorumSource, QuorumWatch } from '../helpers/quorum-watch';

const voter = (name: string): ListedMember => ({
  id: name,
  name,
  peerURLs: [`http://${name}:2380`],
  clientURLs: [`http://${name}:2379`],
  isLearner: false,
  started: true,
});

/**
 * A cluster on a hand-moved clock: `listTakesMs` is how long the next member list takes to answer,
 * `healthy` which voters answer /health now.
 */
function fakeCluster(voters: string[], required = voters) {
  const state = { clock: 1_000_000, listTakesMs: 0, healthy: new Set(voters) };
  const source: QuorumSource = {
    list: async () => {
      state.clock += state.listTakesMs;
      return voters.map(voter);
    },
    healthy: async (name) => state.healthy.has(name),
    required: () => required.map((name) => ({ name, peerURL: `http://${name}:2380` })),
  };
  const watch = new QuorumWatch(source, { listEveryMs: 1000, now: () => state.clock });
  return { state, watch };
}

describe('the fault-injection quorum watch', () => {
  it('when a sample waits 5 s for the member list and then sees one voter of three healthy for one sample, then the stretch counts from the health observation (300 ms), not from the sample start', async () => {
    const { state, watch } = fakeCluster(['a', 'b', 'c']);
    await watch.sample();
    state.clock += 1500;
    state.listTakesMs = 5000; // the list read waits for a member frozen after the endpoints were chosen
    state.healthy = new Set(['a']);
    await watch.sample();
    state.listTakesMs = 0;
    state.clock += 300;
    state.healthy = new Set(['a', 'b', 'c']);
    await watch.sample();

    expect(watch.longestGapMs).toBe(300);
  });

  it('when two of three voters stay unhealthy for 6 s of samples, then the longest stretch is 6 s and its story names the samples and the faults noted around it', async () => {
    const { state, watch } = fakeCluster(['a', 'b', 'c']);
    await watch.sample();
    state.clock += 300;
    watch.note('b frozen');
    state.healthy = new Set(['a']);
    for (let t = 0; t <= 6000; t += 300) {
      await watch.sample();
      state.clock += 300;
    }
    state.healthy = new Set(['a', 'b', 'c']);
    await watch.sample();

    expect(watch.longestGapMs).toBe(6300);
    expect(watch.longestGap?.samples[0]).toBe('+0 a+ b- c-');
    expect(watch.describeLongest()).toContain('0 b frozen');
  });

  it('when a list lacks a required member, then it is a problem', async () => {
    const { watch } = fakeCluster(['a', 'b'], ['a', 'b', 'c']);
    await watch.sample();

    expect(watch.problems).toEqual([expect.stringContaining('member list lacks c')]);
  });
});
