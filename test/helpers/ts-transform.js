// jest's TypeScript transform: ts-jest (transpile only: tsconfig's isolatedModules; the type check is
// `npm run typecheck`), with each file's output kept once for every jest project of the run.
// jest keeps transformed files per project (its cache folder is named by the project's config), so
// a fresh machine would transpile every agent and test file once for the unit project and again for
// each etcd version's integration project. Here the output is kept under
// the cache directory by what it depends on only (the file's path and text, tsconfig.json, the
// versions of ts-jest and TypeScript), written whole and renamed into place, so parallel workers
// never read half a file.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- jest loads transformers as CommonJS
const crypto = require('node:crypto');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- as above
const fs = require('node:fs');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- as above
const path = require('node:path');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- as above
const { TsJestTransformer } = require('ts-jest');

const tsconfig = path.join(__dirname, '..', '..', 'tsconfig.json');
const tsJest = new TsJestTransformer({ tsconfig });
const salt = [
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- as above
  require('ts-jest/package.json').version,
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- as above
  require('typescript/package.json').version,
  fs.readFileSync(tsconfig, 'utf8'),
].join('\0');

/** Where the output for `text` of `file` is kept (one folder for every project). */
function keptAt(cacheDirectory, file, text) {
  const key = crypto.createHash('sha256').update(salt).update('\0').update(file).update('\0').update(text).digest('hex');
  return path.join(cacheDirectory, 'ts-transpiled', key.slice(0, 2), `${key}.json`);
}

module.exports = {
  // jest's own per-project cache still answers first; this only runs on its miss.
  getCacheKey: (text, file, options) => tsJest.getCacheKey(text, file, options),
  process(text, file, options) {
    const kept = keptAt(options.config.cacheDirectory, file, text);
    try {
      return JSON.parse(fs.readFileSync(kept, 'utf8'));
    } catch {
      // not kept yet (or unreadable): transpile it
    }
    const done = tsJest.process(text, file, options);
    const out = typeof done === 'string' ? { code: done } : done;
    try {
      fs.mkdirSync(path.dirname(kept), { recursive: true });
      const tmp = `${kept}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, JSON.stringify({ code: out.code, map: out.map }));
      fs.renameSync(tmp, kept);
    } catch {
      // a cache that cannot be written only costs the next project a transpile
    }
    return out;
  },
};
