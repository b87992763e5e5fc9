/**
 * Every relative link in README.md and docs/ resolves: to a file or folder of the repository, and,
 * where it names an anchor (`file.md#section`), to a heading of that Markdown file, slugged the way
 * GitHub renders headings. Links to other sites are not followed (no network in the tests).
 */
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');

/** README.md and every Markdown file under docs/, relative to the repository root. */
function documents(): string[] {
  const walk = (dir: string): string[] =>
    fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
      const rel = path.join(dir, e.name);
      if (e.isDirectory()) return walk(rel);
      return e.name.endsWith('.md') ? [rel] : [];
    });
  return ['README.md', ...(fs.existsSync(path.join(ROOT, 'docs')) ? walk('docs') : [])];
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a Markdown text's headings (a repeated heading gets -1, -2, … as on GitHub). */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const m = !fenced && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1].replace(/\[([^\]]*)\]\([^)]*\)/g, '$1'));
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The link targets of a Markdown text outside code: inline links and images, `[x](target)`. */
export function linkTargets(markdown: string): string[] {
  const text = markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]);
}

/** Why a link from `document` to `target` does not resolve, or undefined when it does. */
function brokenBecause(document: string, target: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined;
  const [file, anchor] = target.split('#', 2);
  const resolved = file === '' ? path.join(ROOT, document) : path.resolve(path.dirname(path.join(ROOT, document)), decodeURI(file));
  if (!resolved.startsWith(ROOT)) return 'points outside the repository';
  if (!fs.existsSync(resolved)) return 'no such file';
  if (anchor === undefined || anchor === '') return undefined;
  if (!resolved.endsWith('.md')) return 'an anchor in a file that is not Markdown';
  return anchors(fs.readFileSync(resolved, 'utf8')).has(anchor) ? undefined : `no heading #${anchor}`;
}

describe('links in the README and docs/', () => {
  it.each(documents().map((d) => [d]))('when %s links to a path, then it resolves', (document) => {
    const text = fs.readFileSync(path.join(ROOT, document), 'utf8');
    const broken = linkTargets(text)
      .map((target) => ({ target, why: brokenBecause(document, target) }))
      .filter((b) => b.why !== undefined);
    expect(broken).toEqual([]);
  });

  it.each<[string, string, string[]]>([
    ['a plain heading', '# Use with KubeBlocks', ['use-with-kubeblocks']],
    ['code and punctuation', '## `POST /v1/members/join`: idempotent!', ['post-v1membersjoin-idempotent']],
    ['a numbered section', '## 4. HTTP API', ['4-http-api']],
    ['a repeated heading', '## Errors\n## Errors', ['errors', 'errors-1']],
    ['a heading inside a code fence', '```\n# not a heading\n```\n## Real', ['real']],
  ])('when the headings are %s, then their anchors are as GitHub makes them', (_what, markdown, expected) => {
    expect([...anchors(markdown)]).toEqual(expected);
  });

  it.each<[string, string, string[]]>([
    ['inline links and images', 'see [api](docs/api.md) and ![d](a.png "t")', ['docs/api.md', 'a.png']],
    ['links inside code are not links', '`[x](no.md)`\n```\n[y](no2.md)\n```\n[z](yes.md)', ['yes.md']],
    ['an anchor', '[s](api.md#4-http-api)', ['api.md#4-http-api']],
  ])('when a text has %s, then the targets are found', (_what, markdown, expected) => {
    expect(linkTargets(markdown)).toEqual(expected);
  });
});
