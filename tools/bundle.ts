/**
 * The functions bundled as the CDK app bundles them (BUNDLE in cdk/constructs/inbox-function.ts:
 * ESM, minified, the AWS SDK clients external; from the same generated entries,
 * cdk/function-entries.ts), for the tests that run the bundles and the benchmark that weighs
 * them. A platform function lands in `<outDir>/<function>/index.mjs`, a consumer's in
 * `<outDir>/<function>-<consumer>/index.mjs`, as Lambda would hold it.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Metafile } from 'esbuild';
import { assertDependenciesPatched } from '../cdk/constructs/dependency-patches';
import { BUNDLE } from '../cdk/constructs/inbox-function';
import type * as FunctionEntries from '../cdk/function-entries';
import type * as Consumers from '../functions/consumers/index';

export const FUNCTIONS = ['ingest', 'worker', 'reaper', 'ops', 'migrate', 'relay'] as const;
export type FunctionName = (typeof FUNCTIONS)[number];

/** The functions that have a bundle per consumer (the relay: per emitting consumer). */
export const CONSUMER_FUNCTIONS: readonly FunctionName[] = ['ingest', 'worker', 'relay'];

/** The folder of a bundle under its output folder. */
export const bundleDir = (fn: FunctionName, consumer?: string): string => (consumer === undefined ? fn : `${fn}-${consumer}`);

type EntriesModule = typeof FunctionEntries;
type ConsumersModule = typeof Consumers;

/**
 * The entry of `fn` (for `consumer`) in the tree at `sourceRoot`, made by that tree's own
 * cdk/function-entries.ts; a tree from before it (one bundle per function, CONSUMER_NAME
 * choosing among every consumer) has its handler as the entry.
 */
async function entryOf(sourceRoot: string, fn: FunctionName, consumer: string | undefined): Promise<string> {
  const generator = join(sourceRoot, 'cdk', 'function-entries.ts');
  if (!existsSync(generator)) return join(sourceRoot, 'functions', fn, 'handler.ts');
  const entries = (await import(pathToFileURL(generator).href)) as EntriesModule;
  const consumers = (await import(pathToFileURL(join(sourceRoot, 'functions', 'consumers', 'index.ts')).href)) as ConsumersModule;
  const manifest = consumers.localManifest();
  if (fn === 'migrate' || fn === 'ops' || fn === 'reaper') return entries.platformEntry(fn, manifest, sourceRoot);
  if (consumer === undefined) throw new Error(`the ${fn} function is bundled per consumer: name one`);
  if (fn === 'relay')
    return entries.relayEntry(
      manifest.find((c) => c.name === consumer)!,
      sourceRoot,
    );
  return entries.consumerEntry(fn, consumer, entries.sourceOf({ name: consumer }, sourceRoot), sourceRoot);
}

/** The bundles a tree has: each platform function, and each consumer function per consumer (whether it is a tree with per-consumer bundles). */
export async function bundleTargets(sourceRoot: string = ROOT): Promise<{ fn: FunctionName; consumer?: string }[]> {
  if (!existsSync(join(sourceRoot, 'cdk', 'function-entries.ts'))) return FUNCTIONS.map((fn) => ({ fn }));
  const { localManifest } = (await import(pathToFileURL(join(sourceRoot, 'functions', 'consumers', 'index.ts')).href)) as ConsumersModule;
  const manifest = localManifest();
  return FUNCTIONS.flatMap((fn) => {
    if (!CONSUMER_FUNCTIONS.includes(fn)) return [{ fn }];
    const served = fn === 'relay' ? manifest.filter((c) => Object.keys(c.emits ?? {}).length > 0) : manifest;
    return served.map((c) => ({ fn, consumer: c.name }));
  });
}

/**
 * Where the bundle of `fn` for `consumer` is under `outDir`: its own; the function's one
 * bundle (a platform function, or a tree from before per-consumer bundles); else, for a
 * consumer with no bundle (a test of a wrong CONSUMER_NAME), the first consumer's.
 */
export function bundleFileOf(outDir: string, fn: FunctionName, consumer?: string): string {
  const file = (dir: string) => join(outDir, dir, 'index.mjs');
  if (consumer !== undefined && existsSync(file(bundleDir(fn, consumer)))) return file(bundleDir(fn, consumer));
  if (existsSync(file(fn)) || !existsSync(outDir)) return file(fn);
  const first = readdirSync(outDir)
    .filter((d) => d.startsWith(`${fn}-`))
    .sort()[0];
  return file(first ?? fn);
}
const ROOT = fileURLToPath(new URL('../', import.meta.url));

export interface Bundled {
  file: string;
  metafile: Metafile;
}

/**
 * Bundles `fn` (for `consumer`, when it has a bundle per consumer) into its folder under
 * `outDir` (bundleDir). `sourcemap` writes index.mjs.map
 * beside it without changing a byte of the bundle (no sourceMappingURL comment): what runs
 * is what ships. `sourceRoot` is the tree whose handler it is (this one by default; the
 * upgrade test bundles the previous release's, with its own node_modules).
 */
export async function bundleFunction(
  fn: FunctionName,
  outDir: string,
  options: { sourcemap?: boolean; sourceRoot?: string; consumer?: string } = {},
): Promise<Bundled> {
  const sourceRoot = options.sourceRoot ?? ROOT;
  // As the CDK app does: a bundle of unpatched dependencies is not what ships.
  assertDependenciesPatched(sourceRoot);
  const entry = await entryOf(sourceRoot, fn, options.consumer);
  const perConsumer = !entry.endsWith(join('functions', fn, 'handler.ts'));
  const file = join(outDir, bundleDir(fn, perConsumer ? options.consumer : undefined), 'index.mjs');
  const { metafile } = await build({
    entryPoints: [entry],
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

/**
 * The repository-relative entry module of `fn` (for `consumer`) in this tree, for the local
 * runners that load it unbundled with tsx (scripts/invoke.ts, the benchmarks): the same
 * generated entry the bundle is built from.
 */
export async function functionEntry(fn: FunctionName, consumer?: string): Promise<string> {
  return relative(ROOT, await entryOf(ROOT, fn, consumer));
}
