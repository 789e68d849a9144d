/**
 * Which npm packages' code ran in a process, from the V8 coverage it wrote
 * (NODE_V8_COVERAGE): inside a bundle, each function that ran is traced to its source file
 * through the bundle's source map; outside it, every script loaded from node_modules counts.
 * A package bundled but never called (an import() not taken) runs no function at all.
 */
import { readdir, readFile } from 'node:fs/promises';
import { SourceMap } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { packageOf } from '../../tools/bundle';

interface V8Coverage {
  result: {
    url: string;
    functions: { functionName: string; ranges: { startOffset: number; endOffset: number; count: number }[] }[];
  }[];
}

export interface PackagesThatRan {
  /** Packages inside the bundle with a function that ran (`(project)`: the repository's own code). */
  bundled: Set<string>;
  /** Packages loaded from node_modules beside the bundle (its externals, e.g. @aws-sdk/client-*). */
  loaded: Set<string>;
}

/** The index of the line holding `offset`, given each line's first offset. */
function lineOf(lineStarts: readonly number[], offset: number): number {
  let low = 0;
  let high = lineStarts.length - 1;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (lineStarts[mid]! <= offset) low = mid;
    else high = mid - 1;
  }
  return low;
}

/** `bundle` ran with NODE_V8_COVERAGE=`coverageDir` and has its source map beside it (`.map`). */
export async function packagesThatRan(coverageDir: string, bundle: string): Promise<PackagesThatRan> {
  const text = await readFile(bundle, 'utf8');
  const lineStarts = [0];
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) lineStarts.push(i + 1);
  const map = new SourceMap(JSON.parse(await readFile(`${bundle}.map`, 'utf8')));
  const bundleUrl = pathToFileURL(bundle).href;
  const ran: PackagesThatRan = { bundled: new Set(), loaded: new Set() };
  for (const file of (await readdir(coverageDir)).filter((f) => f.endsWith('.json'))) {
    const coverage = JSON.parse(await readFile(`${coverageDir}/${file}`, 'utf8')) as V8Coverage;
    for (const script of coverage.result) {
      if (script.url === bundleUrl) {
        for (const fn of script.functions) {
          const range = fn.ranges[0];
          // Offset 0 is the module's own top level, which spans every package in the bundle.
          if (range === undefined || range.count === 0 || range.startOffset === 0) continue;
          const line = lineOf(lineStarts, range.startOffset);
          const entry = map.findEntry(line, range.startOffset - lineStarts[line]!);
          if ('originalSource' in entry) ran.bundled.add(packageOf(entry.originalSource));
        }
      } else if (script.url.startsWith('file:') && script.url.includes('/node_modules/')) {
        ran.loaded.add(packageOf(fileURLToPath(script.url)));
      }
    }
  }
  return ran;
}
