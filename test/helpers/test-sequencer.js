// Runs the longest test files first, so that no worker is still in a 40 s suite after the others ran
// out of work. Jest's own sequencer does this from the durations it cached on an earlier run of the
// same checkout (its cache is keyed by the checkout's path); a fresh clone has none, and jest then
// orders by file size, which started e.g. prometheus-alerts.test.ts (a small file, a 30 s alert
// `for`) near the end. So, when jest has no duration of its own for a file, this uses the rough one
// below (seconds); a file not listed counts as quick. A stale figure only changes the order, never a
// result.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest loads sequencers as CommonJS
const path = require('node:path');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest's own, which jest-config depends on
const Sequencer = require('@jest/test-sequencer').default;

const SECONDS = {
  // Each file's rough share of scripts/test.sh on etcd 3.6 (the other versions run fewer cases of the
  // files they share).
  'etcd-upgrade.test.ts': 146,
  'recovery-crash.test.ts': 130,
  'recovery.test.ts': 120,
  'prepare.test.ts': 110,
  'fault-injection.test.ts': 84,
  'maintenance-defrag.test.ts': 82,
  'bad-paths.test.ts': 81,
  'etcd-tls-auth.test.ts': 70,
  'kbagent-e2e.test.ts': 66,
  'kbagent-e2e-tls.test.ts': 66,
  'cli.test.ts': 63,
  'membership-quorum.test.ts': 58,
  'etcd-tls-rotation.test.ts': 54,
  'prometheus-alerts.test.ts': 46,
  'membership-crash.test.ts': 34,
  'kbagent-conformance.test.ts': 27,
  'health.test.ts': 25,
  'scripts.test.ts': 24,
  'membership-leave.test.ts': 23,
  'membership-lost-reply.test.ts': 20,
  'any-member.test.ts': 18,
  'etcd-data-dir-facts.test.ts': 18,
  'health-learner.test.ts': 17,
  'kbagent.test.ts': 17,
  'membership-concurrency.test.ts': 15,
  'local-cluster.test.ts': 15,
  'serve-process.test.ts': 14,
  'health-paused.test.ts': 14,
  'etcd-facts.test.ts': 13,
  'membership-join.test.ts': 12,
  'membership-nospace.test.ts': 11,
  'etcd-client.test.ts': 10,
  'role-observation.test.ts': 9,
  'hostile-input.test.ts': 9,
  'http-basics.test.ts': 9,
};

class LongestFirst extends Sequencer {
  time(test) {
    return super.time(test) ?? (SECONDS[path.basename(test.path)] ?? 0) * 1000;
  }
}
module.exports = LongestFirst;
