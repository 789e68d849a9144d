/**
 * `npm run lint:migrations [folder]`: squawk (the PostgreSQL migration linter) over the
 * migration files (migrations/ and the contracts waiting in migrations/next/, or the folder
 * given), as the runner will run them: a file in a transaction with
 * --assume-in-transaction, a `-- migrate:no-transaction` file without. Part of `npm run lint`.
 *
 * - Files up to 0160 are left out: they were applied before the linter, and an applied file's
 *   statements never change (docs/migrations.md). migrations/next/ is linted whole.
 * - require-lock-timeout and require-statement-timeout are left out: the runner sets both
 *   for every file (functions/lib/migrate.ts).
 * - Any other finding is an error; a statement that must do what a rule forbids says why in
 *   a comment, then `-- squawk-ignore <rule>` on the line right above it.
 * - A file in a transaction that builds or drops an index CONCURRENTLY is an error too:
 *   PostgreSQL refuses that inside a transaction, so the file needs the directive.
 *
 * squawk's binary comes from its per-platform npm package, an optional dependency for the
 * platforms CI and the functions' tools run on (@squawk-cli/linux-x64): the registry this
 * project installs from carries no other, and squawk-cli's own wrapper names all of them,
 * which `npm ci` cannot reconcile with a lockfile that lacks them.
 */
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import {
  loadMigrations,
  MIGRATIONS_DIR,
  NO_TRANSACTION_DIRECTIVE,
  unquotedStatementsOf,
  type Migration,
} from '../functions/lib/migration-files';

const FIRST_LINTED_VERSION = 170;
const EXCLUDED_RULES = ['require-lock-timeout', 'require-statement-timeout'];
// The oldest PostgreSQL a stage runs (Aurora PostgreSQL 16) or CI tests (15).
const PG_VERSION = '15';

const run = promisify(execFile);
const require = createRequire(import.meta.url);

/** squawk's binary for this machine, or why there is none. */
function squawkBinary(): string {
  const platform = `@squawk-cli/${process.platform}-${process.arch}`;
  try {
    return join(dirname(require.resolve(`${platform}/package.json`)), 'bin', 'squawk');
  } catch {
    throw new Error(`no squawk binary for ${process.platform}-${process.arch}: ${platform} is not installed (optionalDependencies)`);
  }
}
const SQUAWK = squawkBinary();
// The contracts waiting for the next release (docs/migrations.md): numbered from 0001, linted whole.
const NEXT_DIR = join(MIGRATIONS_DIR, 'next');
const targets = process.argv[2] === undefined ? [MIGRATIONS_DIR, NEXT_DIR] : [process.argv[2]];

async function squawk(dir: string, names: string[], inTransaction: boolean): Promise<boolean> {
  if (names.length === 0) return true;
  const args = [
    `--pg-version=${PG_VERSION}`,
    `--exclude=${EXCLUDED_RULES.join(',')}`,
    inTransaction ? '--assume-in-transaction' : '--no-assume-in-transaction',
    ...names.map((n) => join(dir, n)),
  ];
  try {
    const { stdout } = await run(SQUAWK, args);
    process.stdout.write(stdout);
    return true;
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    process.stdout.write(stdout ?? '');
    process.stderr.write(stderr ?? '');
    return false;
  }
}

/** Transaction files that do what only a no-transaction file can. */
function concurrentInTransaction(dir: string, files: Migration[]): boolean {
  const offenders = files.filter((m) => m.transaction && /\bconcurrently\b/i.test(unquotedStatementsOf(m.sql)));
  for (const m of offenders) {
    console.error(`${join(dir, m.name)}: CONCURRENTLY cannot run inside a transaction: start the file with ${NO_TRANSACTION_DIRECTIVE}`);
  }
  return offenders.length === 0;
}

async function lintFolder(dir: string): Promise<boolean> {
  const first = dir === NEXT_DIR ? 0 : FIRST_LINTED_VERSION;
  const files = (await loadMigrations(dir)).filter((m) => m.version >= first);
  const ok = [
    concurrentInTransaction(dir, files),
    await squawk(
      dir,
      files.filter((m) => m.transaction).map((m) => m.name),
      true,
    ),
    await squawk(
      dir,
      files.filter((m) => !m.transaction).map((m) => m.name),
      false,
    ),
  ].every(Boolean);
  const which = dir === NEXT_DIR ? ' in migrations/next/' : ` from ${String(first).padStart(4, '0')} on`;
  console.log(`migration lint: ${files.length} files${which}, ${ok ? 'no findings' : 'findings above'}`);
  return ok;
}

let ok = true;
for (const dir of targets) ok = (await lintFolder(dir)) && ok;
process.exitCode = ok ? 0 : 1;
