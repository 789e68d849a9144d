import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

// The project explains itself: outside docs/, no comment, test or document names a file the
// repository does not hold (a moved module, a design document kept elsewhere).
const ROOT = join(import.meta.dirname, '..', '..');
const TEXT_FILE = /\.(ts|js|mjs|sql|md|json|sh|ya?ml)$|^\.ci\/run$/;
// A path into the tree, or a bare document name.
const MENTION = /(?<![\w./-])((?:functions|test|tools|cdk|bench|scripts|docs|migrations|\.ci)\/[\w./-]+|[\w-]+\.md)\b/g;
// Files a test writes for itself while it runs.
const WRITTEN_BY_TESTS = new Set(['test/db/zz-failing.test.ts']);

function trackedTextFiles(): string[] {
  const listed = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' }).split('\0');
  return listed.filter((f) => f !== '' && !f.startsWith('docs/') && TEXT_FILE.test(f) && existsSync(join(ROOT, f)));
}

function exists(mention: string): boolean {
  const path = mention.replace(/[./]+$/, '');
  if (WRITTEN_BY_TESTS.has(path)) return true;
  // A migration is named by its number (migrations/0045), a module without its extension.
  if (/^migrations\/\d{4}$/.test(path)) return existsSync(join(ROOT, 'migrations')) && migrationNumbered(path.slice(-4));
  const candidates = path.includes('/') ? [path, `${path}.ts`] : [path, `docs/${path}`];
  return candidates.some((c) => existsSync(join(ROOT, c)));
}

let migrationFiles: string[] | undefined;
function migrationNumbered(number: string): boolean {
  migrationFiles ??= execFileSync('git', ['ls-files', 'migrations'], { cwd: ROOT, encoding: 'utf8' }).split('\n');
  return migrationFiles.some((f) => f.startsWith(`migrations/${number}_`));
}

describe('mentions of files', () => {
  it('outside docs/, every file named exists in the repository, and no document kept elsewhere is cited', () => {
    const missing: string[] = [];
    for (const file of trackedTextFiles()) {
      readFileSync(join(ROOT, file), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          for (const [, mention] of line.matchAll(MENTION)) {
            if (!exists(mention!)) missing.push(`${file}:${i + 1}: ${mention}`);
          }
          if (/DESIGN\.md|\bseeds?\/|\bseed 0\d\d|\.\.\/shared\//.test(line)) missing.push(`${file}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(missing).toEqual([]);
  });
});
