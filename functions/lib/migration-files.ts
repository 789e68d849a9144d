/**
 * The files of migrations/ as the runner (./migrate.ts) and the migration linter read them:
 * their order, their checksums, and how a file asks to run outside a transaction.
 *
 * - Files are `NNNN_name.sql`, applied in order of their number.
 * - Every file's statements are checksummed (SHA-256 of the SQL without its comments, see
 *   statementsOf), so that comments may be corrected after a file was applied but its
 *   statements may not.
 * - A file whose first line is `-- migrate:no-transaction` runs statement by statement,
 *   outside a transaction: what PostgreSQL refuses inside one (`CREATE INDEX CONCURRENTLY`,
 *   a backfill that commits batch by batch). Its statements must be safe to run again,
 *   since a file cut short runs again from its first statement (docs/migrations.md).
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
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
  /** False for a file that runs outside a transaction (NO_TRANSACTION_DIRECTIVE). */
  transaction: boolean;
  sql: string;
}

export class MigrationError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MigrationError';
  }
}

const FILE_PATTERN = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/** The first line of a file that runs outside a transaction. */
export const NO_TRANSACTION_DIRECTIVE = '-- migrate:no-transaction';

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

/** Whether a recorded checksum is of the statements form (else: of a whole text). */
export function isStatementsChecksum(checksum: string): boolean {
  return checksum.startsWith(STATEMENTS_PREFIX);
}

/** A checksum short enough for a message. */
export function shortChecksum(checksum: string): string {
  return checksum.replace(STATEMENTS_PREFIX, '').slice(0, 12);
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
 * The SQL outside every quoted part: comments left out, and each string, quoted name and
 * dollar-quoted body (a function's code) as `''`. What a keyword search of the statements
 * themselves reads.
 */
export function unquotedStatementsOf(sql: string): string {
  let out = '';
  for (let i = 0; i < sql.length;) {
    const skipped = commentEnd(sql, i);
    if (skipped !== undefined) {
      out += ' ';
      i = skipped;
      continue;
    }
    const quoted = quotedEnd(sql, i);
    if (quoted !== undefined) {
      out += "''";
      i = quoted;
      continue;
    }
    out += sql[i];
    i += 1;
  }
  return out.replace(/\s+/g, ' ').trim();
}

/**
 * The statements of a text one by one, split at the semicolons outside quotes, quoted names,
 * dollar-quoted bodies and comments; each without its comments (as statementsOf), empty ones
 * left out. For files that run outside a transaction, where each statement is sent alone.
 */
export function splitStatements(sql: string): string[] {
  const statements: string[] = [];
  let start = 0;
  for (let i = 0; i < sql.length;) {
    const skipped = commentEnd(sql, i) ?? quotedEnd(sql, i);
    if (skipped !== undefined) {
      i = skipped;
      continue;
    }
    if (sql[i] === ';') {
      statements.push(statementsOf(sql.slice(start, i)));
      start = i + 1;
    }
    i += 1;
  }
  statements.push(statementsOf(sql.slice(start)));
  return statements.filter((s) => s !== '');
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
      transaction: sql.split('\n', 1)[0]!.trim() !== NO_TRANSACTION_DIRECTIVE,
      sql,
    });
  }
  return migrations;
}

/** The project's migrations folder, relative to this module's location in the source tree. */
export const MIGRATIONS_DIR = new URL('../../migrations/', import.meta.url).pathname;
