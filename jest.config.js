/** Jest runs the TypeScript sources directly through ts-jest (CommonJS). */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', isolatedModules: true }] },
  testTimeout: 60000,
  // Integration suites each start their own etcd processes on free ports; two workers fit 2 cores.
  maxWorkers: 2,
  reporters: ['default', '<rootDir>/test/helpers/summary-reporter.js'],
};
