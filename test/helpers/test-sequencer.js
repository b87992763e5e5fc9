// Runs the longest test files first, so that no worker is still in a 40 s suite after the others ran
// out of work. Jest's own sequencer does this from the durations it cached on an earlier run of the
// same checkout (its cache is keyed by the checkout's path); a fresh clone has none, and jest then
// orders by file size, which started e.g. prometheus-alerts.test.ts (a small file, a 30 s alert
// `for`) near the end. So, when jest has no duration of its own for a file, this uses the rough one
// below (seconds, measured on 2 cores with four workers); a file not listed counts as quick. A stale figure only
// changes the order, never a result.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest loads sequencers as CommonJS
const path = require('node:path');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest's own, which jest-config depends on
const Sequencer = require('@jest/test-sequencer').default;

const SECONDS = {
  // Measured alone (~60 s each) and side by side on a busy 2-core machine (~80 s each).
  'kbagent-e2e.test.ts': 80,
  'kbagent-e2e-tls.test.ts': 80,
  'prepare.test.ts': 47,
  'prometheus-alerts.test.ts': 46,
  'kbagent-conformance.test.ts': 30,
  'etcd-tls-rotation.test.ts': 40,
  'fault-injection.test.ts': 33,
  'etcd-tls-auth.test.ts': 28,
  'health.test.ts': 27,
  'membership-crash.test.ts': 21,
  'membership-concurrency.test.ts': 17,
  'scripts.test.ts': 17,
  'any-member.test.ts': 13,
  'membership-leave.test.ts': 12,
  'cli.test.ts': 10,
  'local-cluster.test.ts': 9,
  'kbagent.test.ts': 9,
  'hostile-input.test.ts': 9,
  'health-learner.test.ts': 8,
  'membership-lost-reply.test.ts': 8,
  'membership-join.test.ts': 8,
  'serve-process.test.ts': 7,
  'membership-nospace.test.ts': 6,
};

class LongestFirst extends Sequencer {
  time(test) {
    return super.time(test) ?? (SECONDS[path.basename(test.path)] ?? 0) * 1000;
  }
}
module.exports = LongestFirst;
