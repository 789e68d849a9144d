/**
 * `npm run bench -- bundles [--runs 21]`
 *
 * What each function ships and what its cold start pays for it: every handler bundled as
 * the CDK app bundles it (tools/bundle.ts), its bytes and gzip bytes (Lambda's code size is
 * the zip), the packages that weigh most in it, and then the module load time of three
 * bundles — the time `import()` of the bundle takes in a fresh Node.js process, which is
 * the part of a cold start the code decides: the ingest function of a JSON consumer
 * (case-projection), the relay, and the reaper beside them as the peer (a function with
 * neither decoders nor a Kafka client). The runs alternate between the three so that the
 * machine's mood falls on each alike; the ratios to the reaper are the figures to compare
 * between machines.
 */
import { execFile } from 'node:child_process';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { bundleFunction, bytesByPackage, FUNCTIONS, type FunctionName } from '../tools/bundle';

const { values: args } = parseArgs({ options: { runs: { type: 'string', default: '21' } } });
const RUNS = Number(args.runs);
const run = promisify(execFile);
const root = fileURLToPath(new URL('../', import.meta.url));
const outDir = `${root}.tmp/bench-bundles-${process.pid}`;

/** A configuration the bundle accepts at cold start; nothing connects while it loads. */
const COLD_START_ENV: Partial<Record<FunctionName, Record<string, string>>> = {
  ingest: { CONSUMER_NAME: 'case-projection' },
  relay: { CONSUMER_NAME: 'case-sla', KAFKA_BROKERS: 'b-1.msk.example:9098', AWS_REGION: 'eu-west-1' },
  reaper: {},
};

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const kib = (n: number) => `${(n / 1024).toFixed(0)} KiB`;

async function sizes(): Promise<Map<FunctionName, string>> {
  const files = new Map<FunctionName, string>();
  console.log(`\nbundle sizes (esbuild, ESM, minified; ${process.version})`);
  console.log('function      bytes       gzip   heaviest packages');
  for (const fn of FUNCTIONS) {
    const { file, metafile } = await bundleFunction(fn, outDir, { consumer: fn === 'relay' ? 'case-sla' : 'case-projection' });
    files.set(fn, file);
    const bytes = await readFile(file);
    const heaviest = [...bytesByPackage(metafile)]
      .filter(([name]) => name !== '(project)')
      .sort((a, b) => b[1] - a[1])
      .slice(0, 4)
      .map(([name, n]) => `${name} ${kib(n)}`)
      .join(', ');
    console.log(`${fn.padEnd(8)} ${fmt(bytes.length).padStart(10)} ${fmt(gzipSync(bytes).length).padStart(10)}   ${heaviest}`);
  }
  return files;
}

/** The milliseconds `import()` of the bundle takes in a fresh process (measured inside it). */
async function loadMs(file: string, env: Record<string, string>): Promise<number> {
  const probe = `const t = performance.now(); await import(${JSON.stringify(pathToFileURL(file).href)}); console.log(performance.now() - t);`;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', probe], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      // Never reached: loading the module does not connect.
      DATABASE_URL: 'postgres://bench@127.0.0.1:9/bench',
      POWERTOOLS_METRICS_DISABLED: 'true',
      ...env,
    },
  });
  return Number(stdout.trim().split('\n').pop());
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.9))]!;

async function coldStarts(files: Map<FunctionName, string>): Promise<void> {
  const measured = Object.keys(COLD_START_ENV) as FunctionName[];
  const times = new Map<FunctionName, number[]>(measured.map((fn) => [fn, []]));
  // One warm-up each (the file system cache), then the runs, interleaved.
  for (const fn of measured) await loadMs(files.get(fn)!, COLD_START_ENV[fn]!);
  for (let i = 0; i < RUNS; i++) {
    for (const fn of measured) times.get(fn)!.push(await loadMs(files.get(fn)!, COLD_START_ENV[fn]!));
  }
  const peer = median(times.get('reaper')!);
  console.log(`\nmodule load time of the bundle, ${RUNS} fresh processes each (ms)`);
  console.log('bundle                        median     p90   × reaper');
  const label: Record<string, string> = { ingest: 'ingest (JSON consumer)', relay: 'relay', reaper: 'reaper (peer)' };
  for (const fn of measured) {
    const xs = times.get(fn)!;
    console.log(
      `${label[fn]!.padEnd(28)} ${median(xs).toFixed(1).padStart(7)} ${p90(xs).toFixed(1).padStart(7)}   ${(median(xs) / peer).toFixed(2)}`,
    );
  }
}

await mkdir(outDir, { recursive: true });
try {
  await coldStarts(await sizes());
} finally {
  await rm(outDir, { recursive: true, force: true });
}
