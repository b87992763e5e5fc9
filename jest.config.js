// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest reads its config as CommonJS
const { integrationProjects } = require('./test/helpers/etcd-versions');

/**
 * Jest runs the TypeScript sources directly through ts-jest (CommonJS), as two projects:
 * - unit: pure logic, no process, no network; `npx jest --selectProjects unit` runs it in seconds.
 * - integration <version>: real etcd processes and real HTTP, one project per etcd version the run
 *   covers (test/helpers/etcd-versions.js: every file on the first, the version-dependent ones on the
 *   others); its globalSetup makes the one build of dist/ that every suite spawning the agent uses
 *   (test/helpers/built-agent.ts) and finds each version's etcd.
 * - kube: the kit's stories on a real one-node Kubernetes (test/kube), run as root, one file at a
 *   time (its runner is serial); its globalSetup builds the images and starts the cluster
 *   (scripts/image.sh, scripts/kube.sh up), its globalTeardown removes the cluster and fails the run
 *   if anything is left. scripts/test.sh runs it as a stage of its own, after the integration tests.
 */
const common = {
  // jest's node environment, saying which handles a file left open (handle-environment.js).
  testEnvironment: '<rootDir>/test/helpers/handle-environment.js',
  testMatch: ['**/*.test.ts'],
  // ts-jest, its output shared by every project (ts-transform.js).
  transform: { '^.+\\.ts$': '<rootDir>/test/helpers/ts-transform.js' },
};

/** TEST_TIME_SCALE (test/helpers/eventually.ts) lengthens every wait of the tests; jest's own limit follows. */
const TIME_SCALE = Number(process.env.TEST_TIME_SCALE || 1) || 1;

module.exports = {
  // Integration suites each start their own etcd processes (3 to 5, with agents beside them). Three
  // workers keep two cores busy; more workers only queue on the same cores.
  maxWorkers: 3,
  // How long a worker told to end may take to be gone before jest kills it and reports it "failed to
  // exit gracefully" (default 500 ms). Nothing holds the workers open, but the kernel takes a while to
  // hand back a worker's heap of several hundred MB after its exit. A handle really left open still
  // keeps a worker past 5 s and is reported (scripts/test.sh fails the run).
  workerGracefulExitTimeout: 5000,
  // jest reads the timeout from the top-level config only (not per project); real etcd needs it.
  testTimeout: 60000 * TIME_SCALE,
  reporters: ['default', '<rootDir>/test/helpers/summary-reporter.js'],
  // Longest files first, also on a fresh clone, where jest has no durations of its own yet.
  testSequencer: '<rootDir>/test/helpers/test-sequencer.js',
  projects: [
    { ...common, displayName: 'unit', roots: ['<rootDir>/test/unit'] },
    ...integrationProjects(common),
    {
      ...common,
      displayName: 'kube',
      roots: ['<rootDir>/test/kube'],
      runner: '<rootDir>/test/kube/helpers/serial-runner.js',
      globalSetup: '<rootDir>/test/kube/helpers/global-setup.ts',
      globalTeardown: '<rootDir>/test/kube/helpers/global-teardown.ts',
    },
  ],
};
