// Prints plain closing lines that CI reads: one per etcd version the run covered ("jest etcd 3.6: N
// passed, N failed, N skipped", for the files of its "integration <version>" project), the unit
// tests' own, and "jest: N passed, N failed, N skipped" for the whole run. With JEST_SUMMARY_FILE
// set, also appends one line per group, "<passed> <failed> <skipped> <group>", to that file
// (scripts/test.sh adds up its runs and prints the per-version summary). With JEST_CASES_FILE set,
// appends one tab-separated line per case, "<ms>\t<group>\t<file>\t<case>", to find where the
// suite's time goes (`sort -rn` it).
// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest loads reporters as CommonJS
const path = require('node:path');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest loads reporters as CommonJS
const fs = require('node:fs');

/** "etcd 3.6" for a file of project "integration 3.6", "unit" for a unit test file. */
function groupOf(result) {
  const name = (result.displayName && result.displayName.name) || result.displayName || '';
  const version = /^integration (\S+)$/.exec(name);
  return version ? `etcd ${version[1]}` : name || 'other';
}

class SummaryReporter {
  onRunComplete(_contexts, results) {
    const groups = new Map();
    for (const file of results.testResults) {
      const group = groupOf(file);
      const g = groups.get(group) || { passed: 0, failed: 0, skipped: 0 };
      g.passed += file.numPassingTests;
      // A file that failed to run at all (a syntax error, a failing beforeAll outside tests) counts as one failure.
      g.failed += file.numFailingTests + (file.testExecError ? 1 : 0);
      g.skipped += file.numPendingTests + file.numTodoTests;
      groups.set(group, g);
    }
    const { numPassedTests, numFailedTests, numPendingTests, numTodoTests, numRuntimeErrorTestSuites } = results;
    const failed = numFailedTests + numRuntimeErrorTestSuites;
    const skipped = numPendingTests + numTodoTests;
    const lines = [...groups]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([group, g]) => `jest ${group}: ${g.passed} passed, ${g.failed} failed, ${g.skipped} skipped`);
    process.stdout.write(`\n${lines.join('\n')}\njest: ${numPassedTests} passed, ${failed} failed, ${skipped} skipped\n`);
    if (process.env.JEST_SUMMARY_FILE) {
      const rows = [...groups].map(([group, g]) => `${g.passed} ${g.failed} ${g.skipped} ${group}\n`).join('');
      // A run-level failure no file carries (a failing globalSetup) still counts.
      const unaccounted = failed - [...groups.values()].reduce((n, g) => n + g.failed, 0);
      fs.appendFileSync(
        process.env.JEST_SUMMARY_FILE,
        rows + (unaccounted > 0 ? `0 ${unaccounted} 0 run\n` : '') + (rows === '' && failed === 0 ? '0 0 0 empty\n' : ''),
      );
    }
    if (process.env.JEST_CASES_FILE) {
      const cases = results.testResults.flatMap((file) =>
        file.testResults.map((c) => `${c.duration ?? 0}\t${groupOf(file)}\t${path.basename(file.testFilePath)}\t${c.fullName}\n`),
      );
      fs.appendFileSync(process.env.JEST_CASES_FILE, cases.join(''));
    }
  }
}
module.exports = SummaryReporter;
