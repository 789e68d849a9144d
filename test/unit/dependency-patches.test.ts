/**
 * The check that node_modules carries the fixes in patches/ (cdk/constructs/dependency-patches.ts),
 * against copies of this repository's postgres package: as installed (patched), as an
 * install that skipped scripts leaves it (the patch's changes taken out again), and at a
 * version the patch was not made for.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { assertDependenciesPatched, parsePatch, unappliedPatches, UnpatchedDependencyError } from '../../cdk/constructs/dependency-patches';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PATCH = 'postgres+3.4.9.patch';
const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** A project root with patches/ and node_modules/postgres copied from this repository. */
function copyOfProject(): string {
  const root = mkdtempSync(join(tmpdir(), 'patches-'));
  roots.push(root);
  cpSync(join(ROOT, 'patches'), join(root, 'patches'), { recursive: true });
  mkdirSync(join(root, 'node_modules'));
  cpSync(join(ROOT, 'node_modules/postgres'), join(root, 'node_modules/postgres'), { recursive: true });
  return root;
}

/** Takes a patch's changes out of the files again: the package as npm installed it. */
function unpatch(root: string): void {
  const patch = readFileSync(join(root, 'patches', PATCH), 'utf8');
  for (const file of parsePatch(patch)) {
    const path = join(root, file.path);
    let content = readFileSync(path, 'utf8');
    // Each hunk's additions, removed where they stand (this patch only adds lines).
    for (const hunk of file.hunks) {
      const added = hunkAdditions(patch, file.path, hunk.line);
      content = content.replace(`${added.join('\n')}\n`, '');
    }
    writeFileSync(path, content);
  }
}

function hunkAdditions(patch: string, path: string, line: number): string[] {
  const section = patch.slice(patch.indexOf(`+++ b/${path}`));
  const hunk = section.slice(section.indexOf(`+${line},`));
  const lines = hunk.split('\n').slice(1);
  const end = lines.findIndex((l) => l.startsWith('@@') || l.startsWith('diff '));
  return (end < 0 ? lines : lines.slice(0, end)).filter((l) => l.startsWith('+')).map((l) => l.slice(1));
}

describe('the fixes in patches/ in node_modules', () => {
  it('finds every change of the postgres patch in this repository’s install', () => {
    expect(unappliedPatches(ROOT)).toEqual([]);
    expect(() => assertDependenciesPatched(ROOT)).not.toThrow();
  });

  it('an install that skipped postinstall: names each file and change missing, and refuses', () => {
    const root = copyOfProject();
    unpatch(root);

    const problems = unappliedPatches(root);

    expect(problems).toEqual([
      `node_modules/postgres/cf/src/connection.js lacks the change of patches/${PATCH} at its line 254`,
      `node_modules/postgres/cf/src/connection.js lacks the change of patches/${PATCH} at its line 449`,
      `node_modules/postgres/cjs/src/connection.js lacks the change of patches/${PATCH} at its line 252`,
      `node_modules/postgres/cjs/src/connection.js lacks the change of patches/${PATCH} at its line 447`,
      `node_modules/postgres/src/connection.js lacks the change of patches/${PATCH} at its line 252`,
      `node_modules/postgres/src/connection.js lacks the change of patches/${PATCH} at its line 447`,
    ]);
    expect(() => assertDependenciesPatched(root)).toThrow(UnpatchedDependencyError);
    expect(() => assertDependenciesPatched(root)).toThrow(/Run `npx patch-package`, then synthesize again/);
  });

  it('half a patch is not a patch: one hunk taken out is named', () => {
    const root = copyOfProject();
    const path = join(root, 'node_modules/postgres/src/connection.js');
    writeFileSync(
      path,
      readFileSync(path, 'utf8').replace(
        '    errorResponse = null\n    clearImmediate(nextWriteTimer)',
        '    clearImmediate(nextWriteTimer)',
      ),
    );

    expect(unappliedPatches(root)).toEqual([
      `node_modules/postgres/src/connection.js lacks the change of patches/${PATCH} at its line 447`,
    ]);
  });

  it('another postgres version than the patch’s: says to re-create the patch or drop it', () => {
    const root = copyOfProject();
    const manifest = join(root, 'node_modules/postgres/package.json');
    writeFileSync(manifest, readFileSync(manifest, 'utf8').replace('"version": "3.4.9"', '"version": "3.4.10"'));

    expect(unappliedPatches(root)).toEqual([
      `postgres 3.4.10 is installed; patches/${PATCH} is for 3.4.9: re-create the patch for 3.4.10, or drop it if 3.4.10 carries the fix`,
    ]);
  });
});
