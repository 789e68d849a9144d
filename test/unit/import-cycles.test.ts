import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// No module of functions/ reaches itself through its imports: type-only imports and re-exports
// count, since each is a reason the two modules cannot be read apart. A dynamic import() is a
// load on demand (the decoders, a registry's client) and is not an edge here.
const ROOT = join(import.meta.dirname, '..', '..');
const FUNCTIONS = join(ROOT, 'functions');

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return tsFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** A relative specifier as the file it names (`./x` is x.ts or x/index.ts), or undefined for a package. */
function resolveSpecifier(from: string, specifier: string, known: ReadonlySet<string>): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  const base = resolve(dirname(from), specifier);
  return [base, `${base}.ts`, join(base, 'index.ts')].find((candidate) => known.has(candidate));
}

/** Each file of functions/ with the files of functions/ it imports, relative to the repository. */
function importGraph(): Map<string, string[]> {
  const files = tsFiles(FUNCTIONS);
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
    const specifiers = source.statements.flatMap((s) =>
      (ts.isImportDeclaration(s) || ts.isExportDeclaration(s)) && s.moduleSpecifier && ts.isStringLiteral(s.moduleSpecifier)
        ? [s.moduleSpecifier.text]
        : [],
    );
    const targets = specifiers.flatMap((specifier) => resolveSpecifier(file, specifier, known) ?? []);
    graph.set(
      relative(ROOT, file),
      [...new Set(targets)].map((t) => relative(ROOT, t)),
    );
  }
  return graph;
}

/** Every cycle's path (a → b → … → a), one per strongly connected component, found by depth-first search. */
export function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const cycles: string[][] = [];
  const done = new Set<string>();
  const inCycle = new Set<string>();
  const visit = (node: string, path: string[]) => {
    if (done.has(node)) return;
    const at = path.indexOf(node);
    if (at >= 0) {
      const cycle = path.slice(at);
      if (!cycle.some((n) => inCycle.has(n))) {
        cycles.push([...cycle, node]);
        cycle.forEach((n) => inCycle.add(n));
      }
      return;
    }
    path.push(node);
    for (const next of graph.get(node) ?? []) visit(next, path);
    path.pop();
    done.add(node);
  };
  for (const node of [...graph.keys()].sort()) visit(node, []);
  return cycles;
}

describe('import cycles', () => {
  it('finds a cycle, with its path, in a graph that has one', () => {
    const graph = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a', 'd']],
      ['d', []],
    ]);
    expect(cyclesOf(graph)).toEqual([['a', 'b', 'c', 'a']]);
    expect(
      cyclesOf(
        new Map([
          ['a', ['b']],
          ['b', []],
        ]),
      ),
    ).toEqual([]);
  });

  it('reads the imports of functions/, type-only ones included', () => {
    const graph = importGraph();
    expect(graph.get('functions/worker/run-lanes.ts')).toContain('functions/worker/batch-types.ts');
    expect(graph.get('functions/worker/handler.ts')?.length).toBeGreaterThan(0);
  });

  it('functions/ has none', () => {
    expect(cyclesOf(importGraph()).map((cycle) => cycle.join(' → '))).toEqual([]);
  });
});
