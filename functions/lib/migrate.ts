/**
 * The one migration runner: used by `npm run migrate`, the tests, the local run and the
 * deploy-time trigger.
 *
 * - Files are `NNNN_name.sql`, applied in order, each in its own transaction.
 * - Every file's SHA-256 is recorded; an applied file that changed (or vanished) is
 *   refused before anything runs, because forward-only means never edited.
 * - Concurrent runs (two deploys racing) serialize on a transaction-scoped advisory lock
 *   taken per file, and re-check inside the lock, so each file is applied exactly once.
 *   A transaction-scoped lock is also safe behind RDS Proxy (no session pinning).
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Sql, TransactionSql } from './db';

export interface Migration {
  version: number;
  name: string;
  checksum: string;
  sql: string;
}

export class MigrationError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MigrationError';
  }
}

const FILE_PATTERN = /^(\d{4})_([a-z0-9_]+)\.sql$/;
// Any constant works; it only has to be the same for every runner of this project.
const LOCK_KEY = 'kafka-inbox:migrations';

export function checksumOf(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Read the migration files of a folder, ordered; refuses bad names and duplicate numbers. */
export async function loadMigrations(dir: string): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const match = FILE_PATTERN.exec(file);
    if (match === null) throw new MigrationError(`migration file name ${file} does not match NNNN_name.sql`);
    const version = Number(match[1]);
    if (migrations.some((m) => m.version === version)) {
      throw new MigrationError(`two migration files share version ${match[1]}`);
    }
    const sql = await readFile(join(dir, file), 'utf8');
    migrations.push({ version, name: file, checksum: checksumOf(sql), sql });
  }
  return migrations;
}

interface AppliedRow {
  version: number;
  name: string;
  checksum: string;
}

async function lock(tx: TransactionSql): Promise<void> {
  await tx`select pg_advisory_xact_lock(hashtext(${LOCK_KEY}))`;
}

async function ensureTable(sql: Sql): Promise<void> {
  await sql.begin(async (tx) => {
    await lock(tx);
    await tx`
      create table if not exists public.inbox_schema_migrations (
        version     integer primary key,
        name        text not null,
        checksum    text not null,
        applied_at  timestamptz not null default now()
      )`;
  });
}

async function appliedMigrations(q: Sql | TransactionSql): Promise<Map<number, AppliedRow>> {
  const rows = await q<AppliedRow[]>`select version, name, checksum from public.inbox_schema_migrations order by version`;
  return new Map(rows.map((r) => [r.version, r]));
}

function verify(applied: Map<number, AppliedRow>, migrations: Migration[]): void {
  const byVersion = new Map(migrations.map((m) => [m.version, m]));
  for (const row of applied.values()) {
    const file = byVersion.get(row.version);
    if (file === undefined) {
      throw new MigrationError(`applied migration ${row.name} has no file any more; migrations are forward-only`);
    }
    if (file.checksum !== row.checksum) {
      throw new MigrationError(
        `migration ${file.name} changed after it was applied (checksum ${row.checksum.slice(0, 12)} → ${file.checksum.slice(0, 12)}); add a new migration instead of editing an applied one`,
      );
    }
  }
}

export interface MigrateResult {
  applied: string[];
  alreadyApplied: number;
}

/** Apply every pending migration. Throws MigrationError; files applied before a failure stay applied. */
export async function migrate(sql: Sql, migrations: Migration[], log: (message: string) => void = () => {}): Promise<MigrateResult> {
  await ensureTable(sql);
  verify(await appliedMigrations(sql), migrations);

  const applied: string[] = [];
  let alreadyApplied = 0;
  for (const migration of migrations) {
    const ran = await sql.begin(async (tx) => {
      await lock(tx);
      // Re-read inside the lock: another runner may have applied it while we waited.
      const current = await appliedMigrations(tx);
      verify(current, migrations);
      if (current.has(migration.version)) return false;
      try {
        await tx.unsafe(migration.sql);
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        throw new MigrationError(`migration ${migration.name} failed: ${reason}`, { cause: error });
      }
      await tx`
        insert into public.inbox_schema_migrations (version, name, checksum)
        values (${migration.version}, ${migration.name}, ${migration.checksum})`;
      return true;
    });
    if (ran) {
      applied.push(migration.name);
      log(`applied ${migration.name}`);
    } else {
      alreadyApplied += 1;
    }
  }
  return { applied, alreadyApplied };
}

/** The project's migrations folder, relative to this module's location in the source tree. */
export const MIGRATIONS_DIR = new URL('../../migrations/', import.meta.url).pathname;
