// The test environment of each "integration <version>" project (etcd-versions.js): jest's node
// environment with ETCD_VERSION set to the project's version in the file's own process.env, which
// the harness (scripts/etcd-version.ts) reads, so each file runs on its project's etcd.
// It also says which handles a test file left open in its worker (timers, sockets, child
// processes), once its tests are done: jest otherwise reports only, at the very end, that a worker
// "failed to exit gracefully", without naming the file that leaked (issue 24).
// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest loads environments as CommonJS
const { TestEnvironment } = require('jest-environment-node');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- as above
const path = require('node:path');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- as above
const { setTimeout: sleep } = require('node:timers/promises');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- as above
const asyncHooks = require('node:async_hooks');

/** Open handles of this process by kind ({Timeout: 2, TCPSocketWrap: 1}). */
function handleCounts() {
  const counts = {};
  for (const kind of process.getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1;
  return counts;
}

class EtcdVersionEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.testPath = context.testPath;
    const version = config.projectConfig.testEnvironmentOptions.etcdVersion;
    if (version) this.global.process.env.ETCD_VERSION = version;
    // Whether this project is the run's first version, which runs every case (version-scope.ts).
    this.global.process.env.ETCD_TEST_FIRST_VERSION = config.projectConfig.testEnvironmentOptions.firstVersion === false ? 'false' : 'true';
  }

  async setup() {
    await super.setup();
    this.handlesBefore = handleCounts();
    // JEST_HANDLE_STACKS=1: also where each timer and socket still holding the worker at the end was made.
    if (process.env.JEST_HANDLE_STACKS === '1') {
      this.made = new Map();
      this.hook = asyncHooks
        .createHook({
          init: (id, type, _trigger, resource) => {
            if (type === 'Timeout' || type === 'TCPWRAP' || type === 'PROCESSWRAP' || type === 'PIPEWRAP') {
              this.made.set(id, { type, resource, stack: new Error().stack.split('\n').slice(2, 14).join('\n') });
            }
          },
          destroy: (id) => this.made.delete(id),
        })
        .enable();
    }
  }

  async teardown() {
    // What closes asynchronously (a socket's end, a child's exit) gets a moment first.
    await sleep(200);
    const after = handleCounts();
    const left = Object.entries(after)
      .map(([kind, n]) => [kind, n - (this.handlesBefore?.[kind] ?? 0)])
      .filter(([, n]) => n > 0);
    if (left.length > 0) {
      const what = left.map(([kind, n]) => `${kind} +${n}`).join(', ');
      process.stderr.write(`handles still active after ${path.relative(process.cwd(), this.testPath)}: ${what}\n`);
      for (const { type, resource, stack } of this.made?.values() ?? []) {
        const held = typeof resource.hasRef === 'function' ? resource.hasRef() : true;
        if (held && !(type === 'Timeout' && resource._destroyed)) process.stderr.write(`  ${type}\n${stack}\n`);
      }
    }
    this.hook?.disable();
    await super.teardown();
  }
}
module.exports = EtcdVersionEnvironment;
