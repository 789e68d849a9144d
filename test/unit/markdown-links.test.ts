import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

// Every relative link of README.md and docs/*.md names a file the repository holds and, into
// a markdown file, a heading it has (GitHub's anchors).
const ROOT = join(import.meta.dirname, '..', '..');
const DOCUMENTS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  for (const [, heading] of withoutCode(markdown).matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const base = heading!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/ /g, '-');
    let anchor = base;
    for (let n = 1; anchors.has(anchor); n++) anchor = `${base}-${n}`;
    anchors.add(anchor);
  }
  return anchors;
}

/** The text outside fenced code blocks and inline code spans. */
function withoutCode(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** The relative links of a document: `[text](target)`, outside code. */
export function relativeLinks(markdown: string): string[] {
  return [...withoutCode(markdown).matchAll(/\]\(([^)\s]+)(?: "[^"]*")?\)/g)]
    .map((m) => m[1]!)
    .filter((target) => !/^[a-z][a-z+.-]*:/i.test(target));
}

/** A link that leads nowhere, as `document: target`, or undefined. */
function broken(document: string, target: string): string | undefined {
  const [path, anchor] = target.split('#') as [string, string | undefined];
  const file = path === '' ? join(ROOT, document) : resolve(dirname(join(ROOT, document)), decodeURIComponent(path));
  if (!existsSync(file)) return `${document}: ${target} (no ${relative(ROOT, file)})`;
  if (anchor !== undefined && file.endsWith('.md') && !anchorsOf(readFileSync(file, 'utf8')).has(anchor)) {
    return `${document}: ${target} (no heading #${anchor})`;
  }
  return undefined;
}

describe('markdown links', () => {
  it('reads links and anchors as GitHub does', () => {
    const doc =
      '# A title\n\n## Runbook: Function silent\n\n## The table at 100 events/s\n\n## A title\n\n[x](design.md#y) `[no](code)` [web](https://e.org)\n';
    expect([...anchorsOf(doc)]).toEqual(['a-title', 'runbook-function-silent', 'the-table-at-100-eventss', 'a-title-1']);
    expect(relativeLinks(doc)).toEqual(['design.md#y']);
    expect(broken('README.md', `docs/${'missing'}.md`)).toBeDefined();
    expect(broken('README.md', 'docs/design.md#no-such-heading')).toBeDefined();
  });

  it.each(DOCUMENTS)('%s: every relative link reaches its file and heading', (document) => {
    const links = relativeLinks(readFileSync(join(ROOT, document), 'utf8'));
    expect(links.flatMap((target) => broken(document, target) ?? [])).toEqual([]);
  });
});
