/**
 * The functions bundled as the CDK app bundles them (BUNDLE in cdk/constructs/inbox-function.ts:
 * ESM, minified, the AWS SDK clients external), for the tests that run the bundles and the
 * benchmark that weighs them. Each lands in `<outDir>/<function>/index.mjs`, as Lambda
 * would hold it.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Metafile } from 'esbuild';
import { assertDependenciesPatched } from '../cdk/constructs/dependency-patches';
import { BUNDLE } from '../cdk/constructs/inbox-function';

export const FUNCTIONS = ['ingest', 'worker', 'reaper', 'ops', 'migrate', 'relay'] as const;
export type FunctionName = (typeof FUNCTIONS)[number];

const ROOT = fileURLToPath(new URL('../', import.meta.url));

export interface Bundled {
  file: string;
  metafile: Metafile;
}

/**
 * Bundles `fn`'s handler into `<outDir>/<fn>/index.mjs`. `sourcemap` writes index.mjs.map
 * beside it without changing a byte of the bundle (no sourceMappingURL comment): what runs
 * is what ships. `sourceRoot` is the tree whose handler it is (this one by default; the
 * upgrade test bundles the previous release's, with its own node_modules).
 */
export async function bundleFunction(
  fn: FunctionName,
  outDir: string,
  options: { sourcemap?: boolean; sourceRoot?: string } = {},
): Promise<Bundled> {
  const sourceRoot = options.sourceRoot ?? ROOT;
  // As the CDK app does: a bundle of unpatched dependencies is not what ships.
  assertDependenciesPatched(sourceRoot);
  const file = `${outDir}/${fn}/index.mjs`;
  const { metafile } = await build({
    entryPoints: [join(sourceRoot, 'functions', fn, 'handler.ts')],
    absWorkingDir: sourceRoot,
    outfile: file,
    bundle: true,
    logLevel: 'silent',
    metafile: true,
    ...(options.sourcemap ? { sourcemap: 'external' as const } : {}),
    format: BUNDLE.format,
    target: BUNDLE.target,
    platform: BUNDLE.platform,
    mainFields: [...BUNDLE.mainFields],
    minify: BUNDLE.minify,
    banner: { js: BUNDLE.banner },
    external: [...BUNDLE.external],
    alias: { ...BUNDLE.alias },
  });
  return { file, metafile };
}

/** The bytes each npm package (or `(project)` for the repository's own code) adds to a bundle. */
export function bytesByPackage(metafile: Metafile): Map<string, number> {
  const sizes = new Map<string, number>();
  for (const output of Object.values(metafile.outputs)) {
    for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
      const name = packageOf(input);
      sizes.set(name, (sizes.get(name) ?? 0) + bytesInOutput);
    }
  }
  return sizes;
}

/** `node_modules/@scope/name/lib/x.js` → `@scope/name`; anything else is the project's own. */
export function packageOf(path: string): string {
  const at = path.lastIndexOf('node_modules/');
  if (at < 0) return '(project)';
  const [first, second] = path.slice(at + 'node_modules/'.length).split('/');
  return first!.startsWith('@') ? `${first}/${second}` : first!;
}
