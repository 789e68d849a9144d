/** `npm run lint:migrations` as CI runs it: squawk over the files from 0170 on, the runner's way. */
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));

async function lint(files: Record<string, string>): Promise<{ code: number; out: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'lint-'));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  try {
    const { stdout, stderr } = await run('npm', ['run', '--silent', 'lint:migrations', '--', dir], { cwd: root });
    return { code: 0, out: stdout + stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, out: e.stdout + e.stderr };
  }
}

describe('the migration linter', () => {
  it('fails a blocking index build in a new file, and names the rule', async () => {
    const result = await lint({ '0170_index.sql': 'create index t_x on t (x);\n' });
    expect(result.code).toBe(1);
    expect(result.out).toContain('require-concurrent-index-creation');
  }, 30_000);

  it('passes it when the statement says why, and leaves files up to 0160 alone', async () => {
    const result = await lint({
      '0160_old.sql': 'create index t_y on t (y);\n',
      '0170_index.sql':
        '-- why: t is created empty in 0169\n-- squawk-ignore require-concurrent-index-creation\ncreate index t_x on t (x);\n',
    });
    expect(result).toEqual({ code: 0, out: expect.stringContaining('migration lint: 1 files from 0170 on, no findings') });
  }, 30_000);

  it('wants CONCURRENTLY in a no-transaction file, and checks that file without assuming a transaction', async () => {
    const ok = await lint({ '0170_index.sql': '-- migrate:no-transaction\ncreate index concurrently if not exists t_x on t (x);\n' });
    expect(ok.code).toBe(0);
    const inside = await lint({ '0170_index.sql': 'create index concurrently if not exists t_x on t (x);\n' });
    expect(inside.code).toBe(1);
    expect(inside.out).toContain(
      '0170_index.sql: CONCURRENTLY cannot run inside a transaction: start the file with -- migrate:no-transaction',
    );
  }, 30_000);
});
