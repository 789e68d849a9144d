/**
 * The fixes in patches/ (patch-package, applied by `npm install`'s postinstall) must be in
 * the code the functions are bundled from. An install that skipped scripts (`npm ci
 * --ignore-scripts`, a deploy host's policy) leaves node_modules unpatched, and nothing
 * else would notice: the bundles would ship the defect. Every InboxFunction checks, at
 * synth, that each patch's changes are present in node_modules, for the version the patch
 * was made for; so do the tools that bundle the functions for the tests and benchmarks.
 *
 * A patch is present when every hunk's resulting lines (context and additions, in order)
 * appear in the installed file. Drop a patch when an upstream release carries its fix.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export class UnpatchedDependencyError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(
      `node_modules lacks the fixes in patches/, which the function bundles must carry:\n${problems.map((p) => `  - ${p}`).join('\n')}\n` +
        'patch-package applies them at `npm install` (postinstall): an install with --ignore-scripts skips it. ' +
        'Run `npx patch-package`, then synthesize again.',
    );
    this.name = 'UnpatchedDependencyError';
  }
}

interface Hunk {
  /** The hunk's first line in the patched file. */
  line: number;
  /** Its lines after the patch: context and additions. */
  after: string[];
}

interface FilePatch {
  /** Relative to the project root: node_modules/<package>/… */
  path: string;
  hunks: Hunk[];
}

/** A unified diff as patch-package writes it, file by file. */
export function parsePatch(text: string): FilePatch[] {
  const files: FilePatch[] = [];
  let hunk: Hunk | undefined;
  for (const line of text.split('\n')) {
    const target = /^\+\+\+ b\/(.+)$/.exec(line);
    if (target) {
      files.push({ path: target[1]!, hunks: [] });
      hunk = undefined;
      continue;
    }
    const header = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
    if (header && files.length > 0) {
      hunk = { line: Number(header[1]), after: [] };
      files[files.length - 1]!.hunks.push(hunk);
      continue;
    }
    if (hunk === undefined) continue;
    if (line.startsWith(' ') || line.startsWith('+')) hunk.after.push(line.slice(1));
    else if (!line.startsWith('-') && !line.startsWith('\\')) hunk = undefined;
  }
  return files;
}

/** `postgres+3.4.9.patch` → postgres 3.4.9; `@scope+name+1.0.0.patch` → @scope/name 1.0.0. */
function packageOfPatch(file: string): { name: string; version: string } {
  const parts = file.replace(/\.patch$/, '').split('+');
  return { name: parts.slice(0, -1).join('/'), version: parts[parts.length - 1]! };
}

/** What is missing of each patch in `root`/patches from `root`/node_modules; empty when all are applied. */
export function unappliedPatches(root: string): string[] {
  const dir = join(root, 'patches');
  if (!existsSync(dir)) return [];
  const problems: string[] = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.patch'))
    .sort()) {
    const { name, version } = packageOfPatch(file);
    const manifest = join(root, 'node_modules', name, 'package.json');
    const installed = existsSync(manifest) ? (JSON.parse(readFileSync(manifest, 'utf8')) as { version?: string }).version : undefined;
    if (installed !== version) {
      problems.push(
        installed === undefined
          ? `${name} is not installed; patches/${file} is for ${version}`
          : `${name} ${installed} is installed; patches/${file} is for ${version}: re-create the patch for ${installed}, or drop it if ${installed} carries the fix`,
      );
      continue;
    }
    for (const target of parsePatch(readFileSync(join(dir, file), 'utf8'))) {
      const path = join(root, target.path);
      const content = existsSync(path) ? readFileSync(path, 'utf8') : undefined;
      for (const hunk of target.hunks) {
        if (content === undefined || !content.includes(hunk.after.join('\n')))
          problems.push(`${target.path} lacks the change of patches/${file} at its line ${hunk.line}`);
      }
    }
  }
  return problems;
}

const checked = new Set<string>();

/** Throws UnpatchedDependencyError unless every patch of `root`/patches is applied (checked once per root and process). */
export function assertDependenciesPatched(root: string): void {
  if (checked.has(root)) return;
  const problems = unappliedPatches(root);
  if (problems.length > 0) throw new UnpatchedDependencyError(problems);
  checked.add(root);
}
