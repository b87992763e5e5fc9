// The test environment of every project: jest's node environment that also says which handles a
// test file left open in its worker (timers not unref'd, sockets, child processes), once its tests
// are done. jest otherwise reports only, at the very end, that a worker "failed to exit gracefully",
// without naming the file that leaked. JEST_HANDLE_STACKS=1 adds where each was made.
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

class HandleReportingEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.testPath = context.testPath;
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

  /** Kinds of handle more now than when the file started, with how many more. */
  handlesLeft() {
    return Object.entries(handleCounts())
      .map(([kind, n]) => [kind, n - (this.handlesBefore?.[kind] ?? 0)])
      .filter(([, n]) => n > 0);
  }

  async teardown() {
    // What closes asynchronously (a socket's end, a child's exit) gets a moment, when anything is left.
    let left = this.handlesLeft();
    if (left.length > 0) {
      await sleep(200);
      left = this.handlesLeft();
    }
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
module.exports = HandleReportingEnvironment;
