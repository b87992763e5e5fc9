#!/usr/bin/env node
/**
 * Entry point: argv → the command table (command-table.ts), then the exit. Wiring only; no logic.
 */
import { runMain } from './cli/command-table';
import { EXIT_DRAIN_MS } from './config/timings';

const io = {
  stdout: (s: string) => void process.stdout.write(s),
  stderr: (s: string) => void process.stderr.write(s),
  isTTY: process.stdout.isTTY === true,
};

runMain(process.argv.slice(2), io).then(
  (code) => {
    process.exitCode = code;
    // Let the last log lines drain, then leave even if a stray handle (a gRPC channel) lingers. The
    // timer is not unref'd: were the process left to exit on an empty event loop, Node would first
    // drop its signal handlers, and a second SIGTERM in that moment would kill it by signal.
    setTimeout(() => process.exit(code), EXIT_DRAIN_MS);
  },
  (err: unknown) => {
    process.stderr.write(`etcd-lifecycle-agent: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
