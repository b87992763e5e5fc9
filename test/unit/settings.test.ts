/**
 * The settings table (agent/config/settings.ts) is the one list of settings: config, `--help` and
 * docs/configuration.md's table come from it. After changing a row, `npm run docs:config` rewrites
 * the document's table.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CONFIG_VARIABLES, flagFor, SERVE_USAGE } from '../../agent/config/config';
import { configurationTable, SETTINGS } from '../../agent/config/settings';
import { renderUsage } from '../../agent/lib/usage';
import { CONFIGURATION_DOC, documentedTable, withGeneratedTable } from '../../scripts/config-doc';

const DOC = fs.readFileSync(path.resolve(__dirname, '../..', CONFIGURATION_DOC), 'utf8');

describe('the settings table', () => {
  it("when docs/configuration.md's table is compared with the one the settings make, then they are the same", () => {
    expect(documentedTable(DOC)).toBe(configurationTable());
  });

  it('when the table is generated into a document, then only the lines between the markers change', () => {
    const doc = DOC.replace(documentedTable(DOC) ?? '', '| stale |\n');
    expect(withGeneratedTable(doc)).toBe(DOC);
    expect(() => withGeneratedTable('# no markers\n')).toThrow('has no settings table markers');
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
