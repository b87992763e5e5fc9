// The kube project's runner: jest's own, always serial and in jest's own process. Every story
// file shares the one cluster of scripts/kube.sh (its PVs, its two cores), so two never run at once,
// whatever maxWorkers and whichever other projects run beside.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest loads runners as CommonJS
const TestRunner = require('jest-runner').default;

class SerialRunner extends TestRunner {
  constructor(...args) {
    super(...args);
    // jest's base runner declares isSerial as an instance field, so it is set here, not as a getter.
    this.isSerial = true;
  }
}
module.exports = SerialRunner;
