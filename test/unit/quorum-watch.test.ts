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
 * `healthy` which voters answer /health true now, `silent` which do not answer in time (the others
 * answer false or refuse).
 */
function fakeCluster(voters: string[], required = voters) {
  const state = { clock: 1_000_000, listTakesMs: 0, healthy: new Set(voters), silent: new Set<string>() };
  const source: QuorumSource = {
    list: async () => {
      state.clock += state.listTakesMs;
      return voters.map(voter);
    },
    health: async (name) => (state.healthy.has(name) ? 'ok' : state.silent.has(name) ? 'unknown' : 'down'),
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
    expect(watch.stretches).toHaveLength(1);
    expect(watch.stretches[0].samples[0]).toBe('+0 a+ b- c-');
    expect(watch.describe()).toContain('0 b frozen');
  });

  it('when two of three voters do not answer in time, then that is no evidence: no stretch opens, and one already open stays open until a quorum answers', async () => {
    const { state, watch } = fakeCluster(['a', 'b', 'c']);
    await watch.sample();
    state.healthy = new Set(['a']);
    state.silent = new Set(['b', 'c']);
    for (let t = 0; t < 3; t++) {
      state.clock += 300;
      await watch.sample();
    }
    expect(watch.stretches).toEqual([]);

    state.silent = new Set(['c']); // b refuses: 1 of 3 down is not yet a lost quorum, 1 ok is not a quorum either
    state.clock += 300;
    await watch.sample();
    state.silent = new Set();
    state.clock += 300;
    await watch.sample(); // b and c refuse: the quorum is lost
    state.silent = new Set(['b', 'c']);
    state.clock += 300;
    await watch.sample(); // silent again: still lost, as far as anyone can tell
    state.healthy = new Set(['a', 'b']);
    state.silent = new Set();
    state.clock += 300;
    await watch.sample();

    expect(watch.stretches.map((s) => [s.to - s.from, s.samples])).toEqual([[600, ['+0 a+ b- c-', '+300 a+ b? c?']]]);
  });

  it('when a sample is in flight as the watch stops, then stop waits for it and ends the stretch it opened', async () => {
    const { state, watch } = fakeCluster(['a', 'b', 'c']);
    await watch.sample();
    state.healthy = new Set(['a']);
    const inFlight = watch.sample();
    await watch.stop();
    await inFlight;

    expect(watch.samples).toBe(2);
    expect(watch.stretches).toHaveLength(1);
  });

  it('when a list lacks a required member, then it is a problem', async () => {
    const { watch } = fakeCluster(['a', 'b'], ['a', 'b', 'c']);
    await watch.sample();

    expect(watch.problems).toEqual([expect.stringContaining('member list lacks c')]);
  });
});
