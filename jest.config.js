// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest reads its config as CommonJS
const { integrationProjects } = require('./test/helpers/etcd-versions');

/**
 * Jest runs the TypeScript sources directly through ts-jest (CommonJS), as two projects:
 * - unit: pure logic, no process, no network; `npx jest --selectProjects unit` runs it in seconds.
 * - integration <version>: real etcd processes and real HTTP, one project per etcd version the run
 *   covers (test/helpers/etcd-versions.js: every file on the first, the version-dependent ones on the
 *   others); its globalSetup makes the one build of dist/ that every suite spawning the agent uses
 *   (test/helpers/built-agent.ts) and finds each version's etcd.
 */
const common = {
  testEnvironment: 'node',
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  // Latency-measuring suites run last and alone (see the file); the same runner for both projects, so
  // unit and integration files still share one pool of workers.
  runner: '<rootDir>/test/helpers/quiet-runner.js',
};

module.exports = {
  // Integration suites each start their own etcd processes on free ports and mostly wait (on etcd's
  // elections and 5 s reconfiguration guard, alert windows, deadlines), so on 2 cores four workers
  // run them in about a quarter of the time one would. A fifth (tried on the four-version suite, where
  // four kept 1.6 of the 2 cores busy) pushed the load average to 14 and timing-bound cases over
  // their bounds (prepare's no-quorum figures, TLS refusals read as "unreachable"); six, before the
  // versions, tripled fault-injection's worst quorum gap.
  maxWorkers: 4,
  // jest reads the timeout from the top-level config only (not per project); real etcd needs it.
  testTimeout: 60000,
  reporters: ['default', '<rootDir>/test/helpers/summary-reporter.js'],
  // Longest files first, also on a fresh clone, where jest has no durations of its own yet.
  testSequencer: '<rootDir>/test/helpers/test-sequencer.js',
  projects: [
    { ...common, displayName: 'unit', roots: ['<rootDir>/test/unit'] },
    ...integrationProjects(common),
  ],
};
