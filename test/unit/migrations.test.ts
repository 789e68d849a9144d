import { describe, expect, it } from 'vitest';
import {
  checksumOf,
  loadMigrations,
  MIGRATIONS_DIR,
  NO_TRANSACTION_DIRECTIVE,
  splitStatements,
  statementsOf,
  unquotedStatementsOf,
} from '../../functions/lib/migration-files';
import { REWORDED_MIGRATIONS } from '../../functions/lib/reworded-migrations';

describe('a migration file’s statements', () => {
  it('leave out line and nested block comments, and whitespace runs become one space', () => {
    const sql = '-- the table\ncreate table a (\n  id int /* key /* nested */ still comment */ primary key\n);\n\n-- done\n';
    expect(statementsOf(sql)).toBe('create table a ( id int primary key );');
  });

  it('keep quoted strings, quoted names and dollar-quoted bodies exactly, comments in them included', () => {
    const sql = [
      "select 'a -- b', E'it\\'s /* x */', \"odd\"\"-- name\";",
      'create function f() returns int language plpgsql as $body$',
      'begin',
      '  -- a comment stored with the function',
      '  return 1;',
      'end $body$;',
    ].join('\n');
    expect(statementsOf(sql)).toBe(
      "select 'a -- b', E'it\\'s /* x */', \"odd\"\"-- name\"; create function f() returns int language plpgsql as " +
        '$body$\nbegin\n  -- a comment stored with the function\n  return 1;\nend $body$;',
    );
  });

  it('differ when a statement changes, and not when only a comment does', () => {
    const before = '-- one\ncreate table a (id int);';
    expect(checksumOf('-- two, reworded\ncreate table a (id int);  ')).toBe(checksumOf(before));
    expect(checksumOf('-- one\ncreate table a (id bigint);')).not.toBe(checksumOf(before));
    expect(checksumOf("select 'x  y';")).not.toBe(checksumOf("select 'x y';"));
    expect(checksumOf('select $$ -- a $$;')).not.toBe(checksumOf('select $$ -- b $$;'));
  });
});

describe('reworded migrations', () => {
  it('each names a project file whose statements are still those of its earlier text', async () => {
    const files = new Map((await loadMigrations(MIGRATIONS_DIR)).map((m) => [m.name, m]));
    expect(REWORDED_MIGRATIONS.size).toBeGreaterThan(0);
    for (const [name, earlier] of REWORDED_MIGRATIONS) {
      const file = files.get(name);
      expect(file, name).toBeDefined();
      expect(file!.checksum, name).toBe(earlier.checksum);
      expect(file!.textChecksum, name).not.toBe(earlier.textChecksum);
    }
  });
});

describe('a no-transaction file’s statements, one by one', () => {
  it('split at semicolons outside quotes, quoted names, dollar-quoted bodies and comments', () => {
    const sql = [
      '-- migrate:no-transaction',
      "create index concurrently if not exists a on t (x) where y <> ';'; -- a comment; with a semicolon",
      'create index concurrently if not exists "odd;name" on t (z);',
      '/* a block; comment */',
      'do $$ begin perform 1; commit; end $$;',
      '',
    ].join('\n');
    expect(splitStatements(sql)).toEqual([
      "create index concurrently if not exists a on t (x) where y <> ';'",
      'create index concurrently if not exists "odd;name" on t (z)',
      'do $$ begin perform 1; commit; end $$',
    ]);
  });

  it('leave quoted text out of a keyword search: strings, quoted names and function bodies', () => {
    const sql =
      "-- concurrently\ncreate function f() returns void language plpgsql as $$ begin raise notice 'concurrently'; end $$;\nselect 'concurrently', \"concurrently\";";
    expect(unquotedStatementsOf(sql)).toBe("create function f() returns void language plpgsql as ''; select '', '';");
    expect(unquotedStatementsOf('create index concurrently i on t (x);')).toContain('concurrently');
  });

  it('mark their file: the directive on the first line', async () => {
    const migrations = await loadMigrations(MIGRATIONS_DIR);
    for (const m of migrations) expect(m.transaction, m.name).toBe(!m.sql.startsWith(NO_TRANSACTION_DIRECTIVE));
  });
});
