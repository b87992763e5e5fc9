/**
 * Jest runs the TypeScript sources directly through ts-jest (CommonJS), as two projects:
 * - unit: pure logic, no process, no network; `npx jest --selectProjects unit` runs it in seconds.
 * - integration: real etcd processes and real HTTP; its globalSetup makes the one build of dist/
 *   that every suite spawning the agent uses (test/helpers/built-agent.ts).
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
  // Integration suites each start their own etcd processes on free ports; two workers fit 2 cores.
  maxWorkers: 2,
  // jest reads the timeout from the top-level config only (not per project); real etcd needs it.
  testTimeout: 60000,
  reporters: ['default', '<rootDir>/test/helpers/summary-reporter.js'],
  // Longest files first, also on a fresh clone, where jest has no durations of its own yet.
  testSequencer: '<rootDir>/test/helpers/test-sequencer.js',
  projects: [
    { ...common, displayName: 'unit', roots: ['<rootDir>/test/unit'] },
    {
      ...common,
      displayName: 'integration',
      roots: ['<rootDir>/test/integration'],
      globalSetup: '<rootDir>/test/helpers/global-setup.ts',
    },
  ],
};
