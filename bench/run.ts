/**
 * `npm run bench -- <name> [options]`: runs bench/<name>.ts. Benchmarks print figures and
 * ratios; they never assert wall-clock times.
 */
import { readdir } from 'node:fs/promises';

const here = new URL('.', import.meta.url);
const available = (await readdir(here))
  .filter((f) => f.endsWith('.ts') && f !== 'run.ts' && !f.startsWith('_'))
  .map((f) => f.replace(/\.ts$/, ''))
  .sort();
const [name, ...rest] = process.argv.slice(2);
if (name === undefined || !available.includes(name)) {
  console.error(`usage: npm run bench -- <${available.join('|')}> [options]`);
  process.exit(name === undefined ? 0 : 2);
}
process.argv = [process.argv[0]!, process.argv[1]!, ...rest];
await import(new URL(`./${name}.ts`, here).href);
