/**
 * The one build of the agent that every test spawning it uses: dist/, as `npm run build` makes it.
 * Invariant: jest's globalSetup (test/helpers/global-setup.ts) has made the bin (the bundle in
 * dist/bin that the image runs) newer than every source before any integration test runs, so no
 * test builds on its own.
 *
 * Why build only when stale rather than always: `npm test` (and scripts/test.sh, through setup.sh) already run
 * `npm run build` before jest, so there a second compile would only cost time; `npx jest` alone
 * builds here, once, when a source is newer than the entry point (or it is missing).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** The repository root. */
export const ROOT = path.resolve(__dirname, '../..');
/** The package's bin, `etcd-lifecycle-agent` (what the image runs; start it with scripts/bin-command.ts). */
export const MAIN_JS = path.join(ROOT, 'dist/bin/etcd-lifecycle-agent.js');

/** What tsconfig.build.json compiles, and the configs that shape the output. */
const SOURCE_DIRS = ['agent', 'scripts'].map((d) => path.join(ROOT, d));
const CONFIGS = ['tsconfig.json', 'tsconfig.build.json'].map((f) => path.join(ROOT, f));

function newest(dir: string): number {
  let latest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) latest = Math.max(latest, newest(file));
    else if (entry.name.endsWith('.ts')) latest = Math.max(latest, fs.statSync(file).mtimeMs);
  }
  return latest;
}

/** True when the bin is missing or older than a source or a tsconfig. */
export function buildIsStale(): boolean {
  if (!fs.existsSync(MAIN_JS)) return true;
  const sources = Math.max(...SOURCE_DIRS.map(newest), ...CONFIGS.map((f) => fs.statSync(f).mtimeMs));
  return fs.statSync(MAIN_JS).mtimeMs < sources;
}

/** Runs `npm run build` (tsc, then the bundle) when the build is stale; rejects with its output on failure. */
export async function buildAgentIfStale(): Promise<'built' | 'fresh'> {
  if (!buildIsStale()) return 'fresh';
  await new Promise<void>((resolve, reject) => {
    execFile('npm', ['run', '--silent', 'build'], { cwd: ROOT }, (err, stdout, stderr) => {
      if (err) reject(new Error(`npm run build failed:\n${stdout}${stderr}`));
      else resolve();
    });
  });
  return 'built';
}
