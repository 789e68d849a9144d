/**
 * `npm run lint:migrations [folder]`: squawk (the PostgreSQL migration linter) over the
 * migration files (migrations/, then migrations/next/), as the runner will run them: a file in a transaction with
 * --assume-in-transaction, a `-- migrate:no-transaction` file without. Part of `npm run lint`.
 *
 * - Files up to 0160 are left out: they were applied before the linter, and an applied file's
 *   statements never change (docs/migrations.md).
 * - require-lock-timeout and require-statement-timeout are left out: the runner sets both
 *   for every file (functions/lib/migrate.ts).
 * - Any other finding is an error; a statement that must do what a rule forbids says why in
 *   a comment, then `-- squawk-ignore <rule>` on the line right above it.
 * - A file in a transaction that builds or drops an index CONCURRENTLY is an error too:
 *   PostgreSQL refuses that inside a transaction, so the file needs the directive.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadMigrations, MIGRATIONS_DIR, NO_TRANSACTION_DIRECTIVE, statementsOf } from '../functions/lib/migration-files';

const FIRST_LINTED_VERSION = 170;
const EXCLUDED_RULES = ['require-lock-timeout', 'require-statement-timeout'];
// The oldest PostgreSQL a stage runs (Aurora PostgreSQL 16) or CI tests (15).
const PG_VERSION = '15';

const run = promisify(execFile);
const dir = process.argv[2] ?? MIGRATIONS_DIR;
// Another folder (migrations/next/, the contracts waiting for the next release) is linted whole.
const first = dir === MIGRATIONS_DIR ? FIRST_LINTED_VERSION : 0;
const files = (await loadMigrations(dir)).filter((m) => m.version >= first);

async function squawk(names: string[], inTransaction: boolean): Promise<boolean> {
  if (names.length === 0) return true;
  const args = [
    `--pg-version=${PG_VERSION}`,
    `--exclude=${EXCLUDED_RULES.join(',')}`,
    inTransaction ? '--assume-in-transaction' : '--no-assume-in-transaction',
    ...names.map((n) => join(dir, n)),
  ];
  try {
    const { stdout } = await run('squawk', args);
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
function concurrentInTransaction(): boolean {
  const offenders = files.filter((m) => m.transaction && /\bconcurrently\b/i.test(statementsOf(m.sql)));
  for (const m of offenders) {
    console.error(`${join(dir, m.name)}: CONCURRENTLY cannot run inside a transaction: start the file with ${NO_TRANSACTION_DIRECTIVE}`);
  }
  return offenders.length === 0;
}

const ok = [
  concurrentInTransaction(),
  await squawk(
    files.filter((m) => m.transaction).map((m) => m.name),
    true,
  ),
  await squawk(
    files.filter((m) => !m.transaction).map((m) => m.name),
    false,
  ),
].every(Boolean);
console.log(
  `migration lint: ${files.length} files of ${dir} from ${String(first).padStart(4, '0')} on, ${ok ? 'no findings' : 'findings above'}`,
);
process.exitCode = ok ? 0 : 1;
