/**
 * The settings table (agent/settings.ts) is the one list of settings: config, `--help` and the
 * README's configuration table come from it. To regenerate the README's table after changing a row:
 * `npm run build && node -e "process.stdout.write(require('./dist/agent/settings').readmeTable())"`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CONFIG_VARIABLES, flagFor, SERVE_USAGE } from '../../agent/config';
import { readmeTable, SETTINGS } from '../../agent/settings';
import { renderUsage } from '../../agent/usage';

const README = fs.readFileSync(path.resolve(__dirname, '../../README.md'), 'utf8');

/** The README's configuration table: from its header row to the first line that is not a row. */
function readmeConfigTable(): string {
  const lines = README.split('\n');
  const start = lines.indexOf('| variable | default | meaning |');
  if (start < 0) throw new Error('README.md has no configuration table');
  const end = lines.findIndex((line, i) => i > start && !line.startsWith('|'));
  return `${lines.slice(start, end).join('\n')}\n`;
}

describe('the settings table', () => {
  it("when the README's configuration table is compared with the one the settings make, then they are the same", () => {
    expect(readmeConfigTable()).toBe(readmeTable());
  });

  it('when serve --help is printed, then every setting is there with its flag and its variable', () => {
    const help = renderUsage(SERVE_USAGE);

    for (const { variable } of SETTINGS) expect(help).toContain(`${flagFor(variable)}, ${variable} (default: `);
  });

  it('when the variables are listed, then each appears once, named ETCD_AGENT_*, with a distinct flag', () => {
    expect(new Set(CONFIG_VARIABLES).size).toBe(CONFIG_VARIABLES.length);
    expect(CONFIG_VARIABLES.every((v) => /^ETCD_AGENT_[A-Z0-9_]+$/.test(v))).toBe(true);
    expect(new Set(CONFIG_VARIABLES.map(flagFor)).size).toBe(CONFIG_VARIABLES.length);
  });
});
