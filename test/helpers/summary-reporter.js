// Prints one plain closing line, "jest: N passed, N failed, N skipped", that CI reads. With
// JEST_SUMMARY_FILE set, also appends the three counts to that file (scripts/test.sh adds up its runs).
// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest loads reporters as CommonJS
const fs = require('node:fs');

class SummaryReporter {
  onRunComplete(_contexts, results) {
    const { numPassedTests, numFailedTests, numPendingTests, numTodoTests, numRuntimeErrorTestSuites } = results;
    const failed = numFailedTests + numRuntimeErrorTestSuites;
    const skipped = numPendingTests + numTodoTests;
    process.stdout.write(`\njest: ${numPassedTests} passed, ${failed} failed, ${skipped} skipped\n`);
    if (process.env.JEST_SUMMARY_FILE) fs.appendFileSync(process.env.JEST_SUMMARY_FILE, `${numPassedTests} ${failed} ${skipped}\n`);
  }
}
module.exports = SummaryReporter;
