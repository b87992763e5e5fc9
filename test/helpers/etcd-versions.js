// Which etcd versions a jest run covers, and which integration files depend on the version.
// The whole integration suite runs on the first version of ETCD_TEST_VERSIONS (default: ETCD_VERSION,
// else 3.6); the files below run on each further one as well (scripts/test.sh asks for
// 3.6,3.4,3.5,3.7). Each version is its own jest project, "integration <version>", so one pool of
// workers runs them all, longest first, and the summary reporter prints a line per version.
// A file belongs here when what it proves could differ between etcd versions: membership, prepare,
// health and learners, NOSPACE, the data-directory facts, TLS, etcd auth, fault injection, kbagent,
// backups (etcd's Snapshot RPC and its restore tool).
// Inside such a file, a case that proves only the agent's own logic runs on the first version alone
// (version-scope.ts). Not here, as nothing in them differs by version: the concurrency of agents
// (membership-concurrency), the agent SIGKILLed mid-change (membership-crash; fault-injection kills it
// on every version beside etcd's own faults), the agent's credential reload (etcd-tls-rotation; TLS
// and auth against each etcd are etcd-tls-auth), and the recovery (its etcd side is
// --force-new-cluster and a WAL read, both in etcd-facts and etcd-data-dir-facts).
// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest reads its config as CommonJS
const path = require('node:path');

const VERSION_DEPENDENT = [
  'membership-join.test.ts',
  'membership-leave.test.ts',
  'membership-lost-reply.test.ts',
  'membership-nospace.test.ts',
  'membership-quorum.test.ts',
  'maintenance-defrag.test.ts',
  'prepare.test.ts',
  'prepare-takeover.test.ts',
  'health.test.ts',
  'health-learner.test.ts',
  'etcd-data-dir-facts.test.ts',
  'etcd-facts.test.ts',
  'etcd-client.test.ts',
  'etcd-tls-auth.test.ts',
  'fault-injection.test.ts',
  'any-member.test.ts',
  'kbagent-conformance.test.ts',
  'backup.test.ts',
  'restore.test.ts',
];

// The quick loop (`bash scripts/test.sh --quick`, ETCD_TEST_QUICK=1): the files that cover the HTTP
// API's routes, answers and refusals, on the first version only. The full suite stays the gate.
const QUICK = [
  'http-basics.test.ts',
  'fast-routes.test.ts',
  'membership-join.test.ts',
  'membership-leave.test.ts',
  'health.test.ts',
  'kbagent.test.ts',
  'auth.test.ts',
  'hostile-input.test.ts',
];

const KNOWN = ['3.4', '3.5', '3.6', '3.7'];

/** The versions asked for, the first being the one the whole suite runs on. */
function testVersions(env = process.env) {
  const asked = (env.ETCD_TEST_VERSIONS || env.ETCD_VERSION || '3.6')
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);
  for (const v of asked) if (!KNOWN.includes(v)) throw new Error(`ETCD_TEST_VERSIONS: ${v} is not one of ${KNOWN.join(', ')}`);
  return [...new Set(asked)];
}

/** The jest projects of the integration tests: all files on the first version, the version-dependent ones on the others. */
function integrationProjects(common, env = process.env) {
  const quick = env.ETCD_TEST_QUICK === '1';
  const versions = quick ? testVersions(env).slice(0, 1) : testVersions(env);
  const firstFiles = quick ? { testMatch: QUICK.map((f) => `**/test/integration/${f}`) } : {};
  return versions.map((version, i) => ({
    ...common,
    displayName: `integration ${version}`,
    roots: ['<rootDir>/test/integration'],
    ...(i === 0 ? firstFiles : { testMatch: VERSION_DEPENDENT.map((f) => `**/test/integration/${f}`) }),
    globalSetup: '<rootDir>/test/helpers/global-setup.ts',
    testEnvironment: path.join(__dirname, 'etcd-environment.js'),
    testEnvironmentOptions: { etcdVersion: version, firstVersion: i === 0 },
  }));
}

module.exports = { VERSION_DEPENDENT, QUICK, testVersions, integrationProjects };
