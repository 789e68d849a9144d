/**
 * The one migration runner: used by `npm run migrate`, the tests, the local run and the
 * deploy-time trigger.
 *
 * - Files are `NNNN_name.sql`, applied in order, each in its own transaction.
 * - Every file's statements are checksummed (SHA-256 of the SQL without its comments, see
 *   statementsOf); an applied file whose statements changed (or that vanished) is refused
 *   before anything runs, because forward-only means never edited. Comments may be
 *   corrected: they are not what ran.
 * - A database whose records hold the SHA-256 of a file's whole text (how the runner
 *   recorded files before it checksummed statements) is accepted when that text is today's,
 *   or when it is a text named in REWORDED_MIGRATIONS whose statements are today's; its
 *   records are then rewritten in the statements form.
 * - Concurrent runs (two deploys racing) serialize on a transaction-scoped advisory lock
 *   taken per file, and re-check inside the lock, so each file is applied exactly once.
 *   A transaction-scoped lock is also safe behind RDS Proxy (no session pinning).
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Sql, TransactionSql } from './db';
import { REWORDED_MIGRATIONS, type RewordedMigration } from './reworded-migrations';

export interface Migration {
  version: number;
  name: string;
  /** The statements' checksum, as recorded for the file (checksumOf). */
  checksum: string;
  /** The SHA-256 of the file's whole text: the form older records hold. */
  textChecksum: string;
  /** An earlier text of this file with the same statements, which a database may have recorded. */
  reworded?: RewordedMigration;
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

const STATEMENTS_PREFIX = 'statements-sha256:';

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The recorded checksum of a migration file: the SHA-256 of its statements. */
export function checksumOf(text: string): string {
  return STATEMENTS_PREFIX + sha256(statementsOf(text));
}

/** The SHA-256 of a file's whole text: the form of records written before statementsOf. */
export function textChecksumOf(text: string): string {
  return sha256(text);
}

const DOLLAR_TAG = /^\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$/;

/** Where the quoted part starting at `i` ends (exclusive): '…' (E'…' with backslashes), "…", $tag$…$tag$. */
function quotedEnd(sql: string, i: number): number | undefined {
  const c = sql[i];
  if (c === "'" || c === '"') {
    const backslashes = c === "'" && /[eE]/.test(sql[i - 1] ?? '') && !/\w/.test(sql[i - 2] ?? '');
    for (let j = i + 1; j < sql.length; j += 1) {
      if (backslashes && sql[j] === '\\') j += 1;
      else if (sql[j] === c) {
        if (sql[j + 1] !== c) return j + 1;
        j += 1;
      }
    }
    return sql.length;
  }
  if (c === '$' && !/\w/.test(sql[i - 1] ?? '')) {
    const tag = DOLLAR_TAG.exec(sql.slice(i))?.[0];
    if (tag === undefined) return undefined;
    const close = sql.indexOf(tag, i + tag.length);
    return close === -1 ? sql.length : close + tag.length;
  }
  return undefined;
}

/** Where the comment starting at `i` ends (exclusive): -- to the line's end, or a nested block. */
function commentEnd(sql: string, i: number): number | undefined {
  if (sql.startsWith('--', i)) {
    const eol = sql.indexOf('\n', i);
    return eol === -1 ? sql.length : eol;
  }
  if (!sql.startsWith('/*', i)) return undefined;
  let depth = 0;
  for (let j = i; j < sql.length; j += 1) {
    if (sql.startsWith('/*', j)) {
      depth += 1;
      j += 1;
    } else if (sql.startsWith('*/', j)) {
      depth -= 1;
      j += 1;
      if (depth === 0) return j + 1;
    }
  }
  return sql.length;
}

/**
 * The SQL that runs: the text without its comments, each run of whitespace outside quotes
 * as one space. Quoted strings, quoted names and dollar-quoted bodies (function bodies with
 * their own comments included) are kept exactly, since they are stored as written.
 */
export function statementsOf(sql: string): string {
  let out = '';
  let plain = '';
  const flush = (): void => {
    out += plain.replace(/\s+/g, ' ');
    plain = '';
  };
  for (let i = 0; i < sql.length;) {
    const comment = commentEnd(sql, i);
    if (comment !== undefined) {
      plain += ' ';
      i = comment;
      continue;
    }
    const quoted = quotedEnd(sql, i);
    if (quoted !== undefined) {
      flush();
      out += sql.slice(i, quoted);
      i = quoted;
      continue;
    }
    plain += sql[i];
    i += 1;
  }
  flush();
  return out.trim();
}

/**
 * Read the migration files of a folder, ordered; refuses bad names and duplicate numbers.
 * `reworded` names earlier texts of files (by file name) that a database may have recorded.
 */
export async function loadMigrations(
  dir: string,
  reworded: ReadonlyMap<string, RewordedMigration> = REWORDED_MIGRATIONS,
): Promise<Migration[]> {
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
    migrations.push({
      version,
      name: file,
      checksum: checksumOf(sql),
      textChecksum: textChecksumOf(sql),
      reworded: reworded.get(file),
      sql,
    });
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

/** Whether a record of the whole text's SHA-256 stands for the file's statements today. */
function matchesTextRecord(file: Migration, recorded: string): boolean {
  if (recorded === file.textChecksum) return true;
  return file.reworded !== undefined && file.reworded.textChecksum === recorded && file.reworded.checksum === file.checksum;
}

/** Refuses a vanished or changed file; returns the records to rewrite in the statements form. */
function verify(applied: Map<number, AppliedRow>, migrations: Migration[]): Migration[] {
  const byVersion = new Map(migrations.map((m) => [m.version, m]));
  const textRecords: Migration[] = [];
  for (const row of applied.values()) {
    const file = byVersion.get(row.version);
    if (file === undefined) {
      throw new MigrationError(`applied migration ${row.name} has no file any more; migrations are forward-only`);
    }
    if (file.checksum === row.checksum) continue;
    if (!row.checksum.startsWith(STATEMENTS_PREFIX) && matchesTextRecord(file, row.checksum)) {
      textRecords.push(file);
    } else {
      throw new MigrationError(
        `migration ${file.name} changed after it was applied (checksum ${shortChecksum(row.checksum)} → ${shortChecksum(file.checksum)}); add a new migration instead of editing an applied one`,
      );
    }
  }
  return textRecords;
}

function shortChecksum(checksum: string): string {
  return checksum.replace(STATEMENTS_PREFIX, '').slice(0, 12);
}

/** Rewrite whole-text records in the statements form, so later comment corrections are accepted. */
async function rewriteTextRecords(sql: Sql, migrations: Migration[]): Promise<void> {
  await sql.begin(async (tx) => {
    await lock(tx);
    for (const file of verify(await appliedMigrations(tx), migrations)) {
      await tx`update public.inbox_schema_migrations set checksum = ${file.checksum} where version = ${file.version}`;
    }
  });
}

export interface MigrateResult {
  applied: string[];
  alreadyApplied: number;
}

/** Apply every pending migration. Throws MigrationError; files applied before a failure stay applied. */
export async function migrate(sql: Sql, migrations: Migration[], log: (message: string) => void = () => {}): Promise<MigrateResult> {
  await ensureTable(sql);
  if (verify(await appliedMigrations(sql), migrations).length > 0) await rewriteTextRecords(sql, migrations);

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
