// The test environment of each "integration <version>" project (etcd-versions.js): the handle
// reporting environment (handle-environment.js) with ETCD_VERSION set to the project's version in
// the file's own process.env, which the harness (scripts/etcd-version.ts) reads, so each file runs on
// its project's etcd.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest loads environments as CommonJS
const HandleReportingEnvironment = require('./handle-environment');

class EtcdVersionEnvironment extends HandleReportingEnvironment {
  constructor(config, context) {
    super(config, context);
    const version = config.projectConfig.testEnvironmentOptions.etcdVersion;
    if (version) this.global.process.env.ETCD_VERSION = version;
    // Each etcd (and etcdctl) a test starts runs its Go code on one thread at a time, as in a pod with
    // a limit of one CPU (Go sets GOMAXPROCS from that limit). A suite runs dozens of members on a few
    // cores: with Go's default (one per core) their idle threads spin beside every other process and
    // use CPU the other tests need. Set GOMAXPROCS to run them otherwise.
    this.global.process.env.GOMAXPROCS ??= '1';
    // Whether this project is the run's first version, which runs every case (version-scope.ts).
    this.global.process.env.ETCD_TEST_FIRST_VERSION = config.projectConfig.testEnvironmentOptions.firstVersion === false ? 'false' : 'true';
  }
}
module.exports = EtcdVersionEnvironment;
