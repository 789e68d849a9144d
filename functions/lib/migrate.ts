/**
 * The one migration runner: used by `npm run migrate`, the tests, the local run and the
 * deploy-time trigger. How to write a migration that it runs safely: docs/migrations.md.
 *
 * - Each file of migrations/ (./migration-files.ts) is applied once, in order, in its own
 *   transaction, or statement by statement for a file that asks to run outside one.
 * - Forward-only: an applied file whose statements changed, or that vanished while later
 *   files of this release are recorded, is refused before anything runs.
 * - A database that a later release migrated (versions recorded beyond this release's
 *   newest file) is up to date for this release: the runner says so and changes nothing.
 *   That is what a CloudFormation rollback runs: this release's migration function on the
 *   later release's schema, which the later release left working for this one.
 * - Concurrent runs (two deploys racing) serialize on a lock of the ledger table taken per
 *   file, and re-check inside it, so each file is applied exactly once. A table only the
 *   owner may touch, rather than an advisory key: any role may take any advisory key, and a
 *   function's role that held this one would stall every deploy. Transaction-scoped, so safe
 *   behind RDS Proxy; a file outside a transaction holds it in a second connection's
 *   transaction while its statements run.
 * - Bounded waits. Every statement runs under a lock_timeout: a DDL statement that cannot
 *   take its lock soon gives up instead of queueing every function's statements behind its
 *   request, and the file is tried again after a growing pause, a bounded number of times.
 *   A statement_timeout bounds the slowest statement to the time the step has.
 */
import type { Sql, TransactionSql } from './db';
import { sqlStateOf } from './errors';
import { isStatementsChecksum, MigrationError, shortChecksum, splitStatements, type Migration } from './migration-files';

export interface MigrateOptions {
  /** Where progress goes (one line per file applied, per lock retry). */
  log?: (message: string) => void;
  /** How long one statement waits for a lock before it gives up (lock_timeout). */
  lockTimeoutMs?: number;
  /** How many times a file is tried when its locks were not available in time. */
  lockAttempts?: number;
  /** The pause before the second attempt; it doubles with each attempt after it, up to 10 s, plus jitter. */
  retryPauseMs?: number;
  /** The longest one statement may run (statement_timeout); the deploy-time step passes the time it has. */
  statementTimeoutMs?: number;
  /** Waits between attempts (tests pass a recorder). */
  sleep?: (ms: number) => Promise<void>;
}

/** The named defaults of MigrateOptions. */
export const MIGRATE_DEFAULTS = {
  // Functions' statements queue behind a DDL statement's lock request for this long at most.
  lockTimeoutMs: 1_000,
  // With the pauses below, about a minute and a half of trying before the step fails.
  lockAttempts: 10,
  retryPauseMs: 500,
  statementTimeoutMs: 10 * 60_000,
} as const;

const MAX_RETRY_PAUSE_MS = 10_000;

export interface MigrateResult {
  applied: string[];
  alreadyApplied: number;
  /** Files a later release recorded: the database is ahead of this release, which applied nothing. */
  newer: string[];
}

// Only while the ledger does not exist yet (the first run on a database): nothing to lock then.
// Any constant works; it only has to be the same for every runner of this project.
const CREATION_LOCK_KEY = 'kafka-inbox:migrations';

/**
 * Where the runner records applied files. The ledger of the runners released up to
 * 2026-12-02, public.inbox_schema_migrations, is kept as well, for the files those runners
 * know (versions up to LEGACY_LEDGER_LAST_VERSION) and never for a later one: those runners
 * refuse a database holding a version they have no file for, and a rollback to them must
 * find their database up to date (docs/migrations.md, "Rollbacks").
 */
const LEGACY_LEDGER_LAST_VERSION = 160;

/** Lock waits that a later attempt can get past: the lock was not free in time, or a deadlock. */
const LOCK_WAIT_SQLSTATES = new Set(['55P03', '40P01']);

/** One connection of the pool, held for a file that runs outside a transaction. */
type ReservedSql = Awaited<ReturnType<Sql['reserve']>>;

interface AppliedRow {
  version: number;
  name: string;
  checksum: string;
}

/** The runners' lock, until the transaction ends: self-conflicting, and the functions' roles have no privilege on the ledger. */
async function lock(tx: TransactionSql): Promise<void> {
  await tx`lock table public.inbox_schema_history in share row exclusive mode`;
}

async function ledgerExists(q: Sql | TransactionSql): Promise<boolean> {
  const [ledger] = await q<{ exists: boolean }[]>`select to_regclass('public.inbox_schema_history') is not null as exists`;
  return ledger!.exists;
}

/** The ledger, and the legacy one; a new ledger starts with what the legacy one holds. */
async function ensureLedgers(sql: Sql): Promise<void> {
  if (await ledgerExists(sql)) return;
  await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtext(${CREATION_LOCK_KEY}))`;
    await tx`
      create table if not exists public.inbox_schema_migrations (
        version     integer primary key,
        name        text not null,
        checksum    text not null,
        applied_at  timestamptz not null default now()
      )`;
    if (await ledgerExists(tx)) return;
    await tx`
      create table public.inbox_schema_history (
        version     integer primary key,
        name        text not null,
        checksum    text not null,
        applied_at  timestamptz not null default now()
      )`;
    await tx`
      insert into public.inbox_schema_history (version, name, checksum, applied_at)
      select version, name, checksum, applied_at from public.inbox_schema_migrations`;
  });
}

async function appliedMigrations(q: Sql | TransactionSql | ReservedSql): Promise<Map<number, AppliedRow>> {
  const rows = await q<AppliedRow[]>`select version, name, checksum from public.inbox_schema_history order by version`;
  return new Map(rows.map((r) => [r.version, r]));
}

async function record(q: TransactionSql | ReservedSql, migration: Migration): Promise<void> {
  await q`
    insert into public.inbox_schema_history (version, name, checksum)
    values (${migration.version}, ${migration.name}, ${migration.checksum})`;
  if (migration.version <= LEGACY_LEDGER_LAST_VERSION) {
    await q`
      insert into public.inbox_schema_migrations (version, name, checksum)
      values (${migration.version}, ${migration.name}, ${migration.checksum})
      on conflict (version) do nothing`;
  }
}

/** Whether a record of the whole text's SHA-256 stands for the file's statements today. */
function matchesTextRecord(file: Migration, recorded: string): boolean {
  if (recorded === file.textChecksum) return true;
  return file.reworded !== undefined && file.reworded.textChecksum === recorded && file.reworded.checksum === file.checksum;
}

interface LedgerState {
  /** Files recorded by the whole text's checksum, to rewrite in the statements form. */
  textRecords: Migration[];
  /** Records beyond this release's newest file: a later release migrated the database. */
  newer: AppliedRow[];
}

/** Refuses a vanished or changed file; says what to rewrite and whether a later release was here. */
function verify(applied: Map<number, AppliedRow>, migrations: Migration[]): LedgerState {
  const byVersion = new Map(migrations.map((m) => [m.version, m]));
  const newest = Math.max(0, ...migrations.map((m) => m.version));
  const state: LedgerState = { textRecords: [], newer: [] };
  for (const row of applied.values()) {
    const file = byVersion.get(row.version);
    if (file === undefined) {
      if (row.version > newest) {
        state.newer.push(row);
        continue;
      }
      throw new MigrationError(`applied migration ${row.name} has no file any more; migrations are forward-only`);
    }
    if (file.checksum === row.checksum) continue;
    if (!isStatementsChecksum(row.checksum) && matchesTextRecord(file, row.checksum)) {
      state.textRecords.push(file);
    } else {
      throw new MigrationError(
        `migration ${file.name} changed after it was applied (checksum ${shortChecksum(row.checksum)} → ${shortChecksum(file.checksum)}); add a new migration instead of editing an applied one`,
      );
    }
  }
  const unapplied = migrations.filter((m) => !applied.has(m.version));
  if (state.newer.length > 0 && unapplied.length > 0) {
    throw new MigrationError(
      `the database holds ${state.newer[0]!.name} of a later release but not ${unapplied[0]!.name} of this one; migrations are forward-only`,
    );
  }
  return state;
}

/** Rewrite whole-text records in the statements form, so later comment corrections are accepted. */
async function rewriteTextRecords(sql: Sql, migrations: Migration[]): Promise<void> {
  await sql.begin(async (tx) => {
    await lock(tx);
    for (const file of verify(await appliedMigrations(tx), migrations).textRecords) {
      await tx`update public.inbox_schema_history set checksum = ${file.checksum} where version = ${file.version}`;
    }
  });
}

type Settings = Required<Omit<MigrateOptions, 'log' | 'sleep'>> & Pick<Required<MigrateOptions>, 'log' | 'sleep'>;

/** The pause before attempt `attempt + 1`: doubling from retryPauseMs, capped, with up to 50 % jitter. */
function retryPause(settings: Settings, attempt: number): number {
  const base = Math.min(settings.retryPauseMs * 2 ** (attempt - 1), MAX_RETRY_PAUSE_MS);
  return Math.round(base * (1 + Math.random() / 2));
}

/**
 * Run `attempt` until it gets past its lock waits, at most lockAttempts times. Each attempt
 * must leave nothing behind when it fails (a rolled-back transaction, one statement).
 */
async function withLockRetries(settings: Settings, name: string, attempt: () => Promise<boolean>): Promise<boolean> {
  for (let n = 1; ; n += 1) {
    try {
      return await attempt();
    } catch (error) {
      const state = sqlStateOf(error);
      if (state === undefined || !LOCK_WAIT_SQLSTATES.has(state)) throw error;
      if (n >= settings.lockAttempts) {
        throw new MigrationError(
          `migration ${name} could not take its locks in ${n} attempts (lock_timeout ${settings.lockTimeoutMs} ms, SQLSTATE ${state}); ` +
            'what holds them is in pg_locks; the step can be run again',
          { cause: error },
        );
      }
      const pause = retryPause(settings, n);
      settings.log(
        `${name}: a lock was not free within ${settings.lockTimeoutMs} ms (attempt ${n} of ${settings.lockAttempts}); again in ${pause} ms`,
      );
      await settings.sleep(pause);
    }
  }
}

function failed(migration: Migration, error: unknown): never {
  if (error instanceof MigrationError) throw error;
  const reason = error instanceof Error ? error.message : String(error);
  throw new MigrationError(`migration ${migration.name} failed: ${reason}`, { cause: error });
}

/** A file in one transaction, with its record; false when another runner had applied it. */
async function applyInTransaction(sql: Sql, migration: Migration, migrations: Migration[], settings: Settings): Promise<boolean> {
  return withLockRetries(settings, migration.name, () =>
    sql.begin(async (tx) => {
      await tx`select set_config('statement_timeout', ${String(settings.statementTimeoutMs)}, true)`;
      await lock(tx);
      // Re-read inside the lock: another runner may have applied it while we waited.
      const current = await appliedMigrations(tx);
      verify(current, migrations);
      if (current.has(migration.version)) return false;
      // After the advisory lock: waiting for another runner is not a lock wait to give up on.
      await tx`select set_config('lock_timeout', ${String(settings.lockTimeoutMs)}, true)`;
      await tx.unsafe(migration.sql);
      await record(tx, migration);
      return true;
    }),
  );
}

/**
 * `create [unique] index concurrently [if not exists] <name> on [only] <table>`: the index it
 * builds, qualified with its table's schema. A build that failed leaves an invalid index of
 * that name behind, which `if not exists` would then take for done.
 */
const CONCURRENT_INDEX =
  /^create\s+(?:unique\s+)?index\s+concurrently\s+(?:if\s+not\s+exists\s+)?("[^"]+"|[a-z_][\w$]*)\s+on\s+(?:only\s+)?(?:("[^"]+"|[a-z_][\w$]*)\.)?/i;

async function dropInvalidIndex(conn: ReservedSql, statement: string, log: (message: string) => void): Promise<void> {
  const match = CONCURRENT_INDEX.exec(statement);
  if (match === null) return;
  const name = match[2] === undefined ? match[1]! : `${match[2]}.${match[1]!}`;
  const [invalid] = await conn<{ index: string }[]>`
    select format('%I.%I', n.nspname, c.relname) as index
    from pg_index i join pg_class c on c.oid = i.indexrelid join pg_namespace n on n.oid = c.relnamespace
    where c.oid = to_regclass(${name}) and not i.indisvalid`;
  if (invalid === undefined) return;
  log(`dropping ${invalid.index}, left invalid by a build that did not finish`);
  await conn.unsafe(`drop index concurrently if exists ${invalid.index}`);
}

/**
 * A file outside a transaction: its statements one by one on one connection, each retried
 * on its own lock waits, while a second connection's transaction holds the runners' lock and
 * records the file once all ran. Until then that transaction runs only SET and LOCK, which
 * take no snapshot, so a concurrent index build does not wait for it. Cut short, the file
 * runs again from its first statement, which is why they must be safe to repeat
 * (docs/migrations.md).
 */
async function applyOutsideTransaction(sql: Sql, migration: Migration, migrations: Migration[], settings: Settings): Promise<boolean> {
  if (sql.options.max < 2)
    throw new MigrationError(`migration ${migration.name} runs outside a transaction: it needs a pool of two connections`);
  const conn = await sql.reserve();
  try {
    return await sql.begin(async (guard) => {
      await guard.unsafe(`set local statement_timeout = ${Math.trunc(settings.statementTimeoutMs)}`);
      // It waits, idle, for as long as the statements take: no role setting may end it meanwhile.
      await guard.unsafe('set local idle_in_transaction_session_timeout = 0');
      await lock(guard);
      const current = await appliedMigrations(conn);
      verify(current, migrations);
      if (current.has(migration.version)) return false;
      await conn`select set_config('statement_timeout', ${String(settings.statementTimeoutMs)}, false)`;
      await conn`select set_config('lock_timeout', ${String(settings.lockTimeoutMs)}, false)`;
      try {
        for (const statement of splitStatements(migration.sql)) {
          await withLockRetries(settings, migration.name, async () => {
            await dropInvalidIndex(conn, statement, settings.log);
            await conn.unsafe(statement);
            return true;
          });
        }
      } finally {
        await conn`select set_config('lock_timeout', '0', false), set_config('statement_timeout', '0', false)`;
      }
      await record(guard, migration);
      return true;
    });
  } finally {
    conn.release();
  }
}

/**
 * Apply every pending migration. Throws MigrationError; files applied before a failure stay
 * applied. A database a later release migrated is left as it is (`newer` names its files).
 */
export async function migrate(sql: Sql, migrations: Migration[], options: MigrateOptions = {}): Promise<MigrateResult> {
  const settings: Settings = {
    lockTimeoutMs: options.lockTimeoutMs ?? MIGRATE_DEFAULTS.lockTimeoutMs,
    lockAttempts: options.lockAttempts ?? MIGRATE_DEFAULTS.lockAttempts,
    retryPauseMs: options.retryPauseMs ?? MIGRATE_DEFAULTS.retryPauseMs,
    statementTimeoutMs: options.statementTimeoutMs ?? MIGRATE_DEFAULTS.statementTimeoutMs,
    log: options.log ?? (() => {}),
    sleep: options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms))),
  };
  await ensureLedgers(sql);
  const state = verify(await appliedMigrations(sql), migrations);
  if (state.newer.length > 0) {
    const newer = state.newer.map((r) => r.name);
    settings.log(`a later release migrated this database (${newer.join(', ')}): it is up to date for this release; nothing to do`);
    return { applied: [], alreadyApplied: migrations.length, newer };
  }
  if (state.textRecords.length > 0) await rewriteTextRecords(sql, migrations);

  const applied: string[] = [];
  let alreadyApplied = 0;
  for (const migration of migrations) {
    const apply = migration.transaction ? applyInTransaction : applyOutsideTransaction;
    const ran = await apply(sql, migration, migrations, settings).catch((error: unknown) => failed(migration, error));
    if (ran) {
      applied.push(migration.name);
      settings.log(`applied ${migration.name}`);
    } else {
      alreadyApplied += 1;
    }
  }
  return { applied, alreadyApplied, newer: [] };
}
