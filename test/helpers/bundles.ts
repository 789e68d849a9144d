/**
 * The functions as they ship: each handler of a source tree bundled with the CDK app's
 * esbuild settings (tools/bundle.ts), then imported and invoked in a
 * fresh Node.js process, configured only through its environment, as in Lambda.
 *
 * Used for this checkout (test/db/bundles.test.ts) and for the previous release's tree
 * (test/db/upgrade/): a bundle's external @aws-sdk clients resolve from the node_modules
 * above the folder it is written to, so write it inside the tree it was built from.
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { bundleFileOf, bundleFunction, bundleTargets, FUNCTIONS, type FunctionName } from '../../tools/bundle';
import { freePort } from '../../tools/embedded-postgres';

export { FUNCTIONS, type FunctionName };

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const INVOKE = join(ROOT, 'tools', 'invoke-handler.mjs');

/** The bundle of `fn` for `consumer` under `outDir` (tools/bundle.ts bundleFileOf). */
export const bundleOf = (outDir: string, fn: FunctionName, consumer?: string): string => bundleFileOf(outDir, fn, consumer);

/**
 * Bundle each function of `sourceRoot` into `outDir`, a consumer's functions once per
 * consumer (tools/bundle.ts: as the CDK app does; `sourcemap` for the functions named), and
 * copy the tree's migrations/ beside the migration function's bundle (what the migrations
 * construct's afterBundling hook does).
 */
export async function buildBundles(
  sourceRoot: string,
  outDir: string,
  options: { functions?: readonly FunctionName[]; sourcemap?: readonly FunctionName[] } = {},
): Promise<void> {
  const functions = options.functions ?? FUNCTIONS;
  const targets = (await bundleTargets(sourceRoot)).filter((t) => functions.includes(t.fn));
  await Promise.all(
    targets.map((t) =>
      bundleFunction(t.fn, outDir, {
        sourceRoot,
        sourcemap: options.sourcemap?.includes(t.fn) === true,
        ...(t.consumer === undefined ? {} : { consumer: t.consumer }),
      }),
    ),
  );
  if (functions.includes('migrate')) {
    await mkdir(join(outDir, 'migrate', 'migrations'), { recursive: true });
    await cp(join(sourceRoot, 'migrations'), join(outDir, 'migrate', 'migrations'), { recursive: true });
  }
}

export interface BundleOutput {
  stdout: string;
  stderr: string;
}

/**
 * Invoke a bundled handler in its own process with `event` and a context whose time left
 * starts at `remainingMs`. The environment is `env` and PATH only, as in Lambda. Rejects
 * (with stdout and stderr) when the handler throws.
 */
export function invokeBundle(
  bundle: string,
  event: unknown,
  env: Record<string, string>,
  options: { requestId?: string; remainingMs?: number; cwd?: string } = {},
): Promise<BundleOutput> {
  const remaining = options.remainingMs ?? 60_000;
  return run(process.execPath, [INVOKE, bundle, JSON.stringify(event), String(remaining), options.requestId ?? 'req-bundle'], {
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    timeout: remaining + 10_000,
    maxBuffer: 64 * 1024 * 1024,
    env: { PATH: process.env.PATH ?? '', ...env },
  });
}

/** The handler's result in an invocation's output (the line tools/invoke-handler.mjs prints). */
export function resultOf(output: BundleOutput): unknown {
  const line = output.stdout.split('\n').find((l) => l.startsWith('RESULT '));
  if (line === undefined) throw new Error(`no RESULT line in the invocation's output:\n${output.stdout}\n${output.stderr}`);
  return JSON.parse(line.slice('RESULT '.length)) as unknown;
}

/** This checkout's functions, bundled into a folder of their own, to invoke and then remove. */
export interface Bundles {
  /** Invoke `fn` in its own process: its output (JSON log lines, the result line). */
  invokeOutput(fn: FunctionName, event: unknown, env: Record<string, string>): Promise<BundleOutput>;
  /** Invoke `fn` in its own process: its result. */
  invoke(fn: FunctionName, event: unknown, env: Record<string, string>): Promise<unknown>;
  /** Where the bundle of `fn` (for `consumer`) is. */
  file(fn: FunctionName, consumer?: string): string;
  remove(): Promise<void>;
}

/**
 * Bundle every function of this checkout into `.tmp/<name>-<pid>` (inside the project, so
 * that the external @aws-sdk/* resolve from node_modules as the runtime's own copies would).
 * Invocations log at ERROR and publish no metrics unless `env` says otherwise.
 */
export async function bundledFunctions(name: string, options: { sourcemap?: readonly FunctionName[] } = {}): Promise<Bundles> {
  const outDir = join(ROOT, '.tmp', `${name}-${process.pid}`);
  await buildBundles(ROOT, outDir, options);
  const invokeOutput = (fn: FunctionName, event: unknown, env: Record<string, string>) =>
    invokeBundle(
      bundleOf(outDir, fn, env.CONSUMER_NAME),
      event,
      { LOG_LEVEL: 'ERROR', POWERTOOLS_METRICS_DISABLED: 'true', ...env },
      { requestId: `req-${fn}`, cwd: ROOT },
    );
  return {
    invokeOutput,
    invoke: async (fn, event, env) => resultOf(await invokeOutput(fn, event, env)),
    file: (fn, consumer) => bundleOf(outDir, fn, consumer),
    remove: () => rm(outDir, { recursive: true, force: true }),
  };
}

/**
 * The relay's environment with brokers nobody answers at: it claims, fails to send, and keeps
 * the rows for its next run, quickly (the fewest retries the client takes, short timeouts).
 */
export async function relayWithoutBrokers(): Promise<Record<string, string>> {
  return {
    KAFKA_BROKERS: `127.0.0.1:${await freePort()}`,
    AWS_REGION: 'eu-west-1',
    // Never used (the connection is refused before SASL); set so no credential lookup leaves the machine.
    AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
    AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
    KAFKA_RETRIES: '2',
    KAFKA_CONNECTION_TIMEOUT_MS: '300',
    RELAY_SAFETY_MARGIN_MS: '1000',
  };
}
