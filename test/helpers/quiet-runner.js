// jest's own runner, except that the test files named in QUIET run after all the others, one at a
// time, in jest's own process (in band), on a machine no longer busy with the parallel suites.
// They measure latency against a control and need that quiet; the other suites only wait on etcd,
// timers and I/O, and run in parallel (maxWorkers in jest.config.js). One jest run, one summary.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest loads runners as CommonJS
const path = require('node:path');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest's own, which jest depends on
const TestRunner = require('jest-runner').default;

/** Files (basenames) that must not share the machine with the parallel suites. */
const QUIET = new Set([
  // /v1/health p99 against a bare control server's, both measured from the test: beside the parallel
  // suites the control's p99 need not stay under its 20 ms in any window (and the agent's observations
  // may time out, answering `unavailable` instead of `degraded`).
  'health-paused.test.ts',
]);

class QuietLast extends TestRunner {
  async runTests(tests, watcher, options) {
    if (options.serial) return super.runTests(tests, watcher, options);
    const quiet = tests.filter((t) => QUIET.has(path.basename(t.path)));
    await super.runTests(
      tests.filter((t) => !quiet.includes(t)),
      watcher,
      options,
    );
    if (quiet.length > 0 && !watcher.isInterrupted()) await super.runTests(quiet, watcher, { ...options, serial: true });
  }
}
module.exports = QuietLast;
