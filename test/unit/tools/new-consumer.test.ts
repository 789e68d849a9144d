/**
 * `npm run new-consumer` as a process, in a copy of the files it reads and writes: what it
 * writes, the list entry it adds, and exit code 2 with nothing written for a bad or taken
 * name. (That its consumer passes the whole suite is shown by adding one in a copy of the
 * repository: docs/consumers.md.)
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../../', import.meta.url));
const script = join(root, 'scripts', 'new-consumer.ts');

/** A folder with what the scaffold reads: the consumers' list and the migrations. */
async function copy(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'new-consumer-'));
  await mkdir(join(dir, 'functions'), { recursive: true });
  await cp(join(root, 'functions', 'consumers'), join(dir, 'functions', 'consumers'), { recursive: true });
  await cp(join(root, 'migrations'), join(dir, 'migrations'), { recursive: true });
  return dir;
}

async function scaffold(cwd: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', import.meta.resolve('tsx'), script, ...args], { cwd });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** Every file under `dir`, relative, with its text. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const files = (await readdir(dir, { recursive: true, withFileTypes: true })).filter((f) => f.isFile());
  return Object.fromEntries(
    await Promise.all(
      files.map(async (f) => {
        const path = join(f.parentPath, f.name);
        return [path.slice(dir.length + 1), await readFile(path, 'utf8')] as const;
      }),
    ),
  );
}

// Each test starts Node.js processes: seconds on a busy machine.
/** What the scaffold writes for the consumer "scaffold-probe" (paths in the copy, not in this repository). */
const DECLARATION = ['functions', 'consumers', 'scaffold-probe.ts'].join('/');
const TEST = ['test', 'db', 'consumers', 'scaffold-probe.test.ts'].join('/');

describe('npm run new-consumer', { timeout: 60_000 }, () => {
  it('writes the declaration, its list entry, the next migration and a test on the kit, and says what remains to decide', async () => {
    const dir = await copy();
    const before = await snapshot(dir);
    const last = Math.max(
      ...Object.keys(before)
        .flatMap((f) => /^migrations\/(\d{4})_/.exec(f)?.[1] ?? [])
        .map(Number),
    );
    const migration = `migrations/${String(last + 1).padStart(4, '0')}_scaffold_probe.sql`;

    const result = await scaffold(dir, ['scaffold-probe', '--topic', 'orders.order-placed.v1']);

    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toContain('To decide');
    expect(result.stdout).toContain("the payload's schema");
    const after = await snapshot(dir);
    const added = Object.keys(after).filter((f) => !(f in before));
    const changed = Object.keys(before).filter((f) => after[f] !== before[f]);
    expect(added.sort()).toEqual([DECLARATION, migration, TEST].sort());
    expect(changed).toEqual(['functions/consumers/index.ts']);
    expect(after['functions/consumers/index.ts']).toContain("import { scaffoldProbe } from './scaffold-probe';");
    expect(after['functions/consumers/index.ts']).toMatch(
      /export const CONSUMERS: readonly ConsumerDeclaration\[\] = \[[^\]]*, scaffoldProbe\];/,
    );
    expect(after[DECLARATION]).toContain('topics: [SCAFFOLD_PROBE_TOPIC]');
    expect(after[DECLARATION]).toContain("'scaffold_probe.received_event': { insert: true }");
    expect(after[migration]).toContain('create table scaffold_probe.received_event');
    expect(after[TEST]).toContain("from '../../../testing'");
  });

  it.each([
    ['a name taken', ['case-sla', '--topic', 't'], /a consumer "case-sla" is there already/],
    ['a bad name', ['Order_Fulfilment', '--topic', 't'], /a-z, 0-9 and single dashes/],
    ['a name too long for its roles', [`a${'-b'.repeat(30)}`, '--topic', 't'], /50 at most/],
    ['no topic', ['orders'], /--topic/],
    ['a bad topic', ['orders', '--topic', 'no spaces'], /--topic/],
    ['an unknown option', ['orders', '--topic', 't', '--stack', 'x'], /Unknown option/],
  ])('refuses %s with exit code 2 and writes nothing', async (_what, args, message) => {
    const dir = await copy();
    const before = await snapshot(dir);
    const result = await scaffold(dir, args);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(await snapshot(dir)).toEqual(before);
  });
});
