import { execFile } from 'node:child_process';
import { mkdtemp, readdir, writeFile, copyFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../../functions/lib/migrate';
import { checksumOf, loadMigrations, MigrationError, MIGRATIONS_DIR, textChecksumOf } from '../../../functions/lib/migration-files';
import { emptyDatabase, type TestDatabase } from '../../helpers/db';

const run = promisify(execFile);

async function folderWith(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'migrations-'));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}

async function appliedVersions(db: TestDatabase): Promise<number[]> {
  const rows = await db.sql<{ version: number }[]>`select version from public.inbox_schema_history order by version`;
  return rows.map((r) => r.version);
}

describe('migration runner', () => {
  it('applies every project migration to an empty database, and a re-run is a no-op', async () => {
    const db = await emptyDatabase();
    try {
      const migrations = await loadMigrations(MIGRATIONS_DIR);
      const files = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')).sort();
      expect(migrations.map((m) => m.name)).toEqual(files);

      const first = await migrate(db.sql, migrations);
      expect(first.applied).toEqual(files);
      expect(await appliedVersions(db)).toEqual(migrations.map((m) => m.version));

      const second = await migrate(db.sql, migrations);
      expect(second.applied).toEqual([]);
      expect(second.alreadyApplied).toBe(files.length);
      expect(await appliedVersions(db)).toEqual(migrations.map((m) => m.version));
    } finally {
      await db.drop();
    }
  });

  it('applies each file once when two runs race', async () => {
    const db = await emptyDatabase();
    try {
      // A side effect that would show a second application: a counter row per run of file 2.
      const dir = await folderWith({
        '0001_counter.sql': 'create table applied_count (file text, n int default 1);',
        '0002_bump.sql': "select pg_sleep(0.2); insert into applied_count (file) values ('0002');",
        '0003_bump.sql': "insert into applied_count (file) values ('0003');",
      });
      const migrations = await loadMigrations(dir);
      const a = db.client({ max: 1 });
      const b = db.client({ max: 1 });
      const [ra, rb] = await Promise.all([migrate(a, migrations), migrate(b, migrations)]);
      expect([...ra.applied, ...rb.applied].sort()).toEqual(['0001_counter.sql', '0002_bump.sql', '0003_bump.sql']);
      const counts = await db.sql`select file, count(*)::int as n from applied_count group by file order by file`;
      expect(counts).toEqual([
        { file: '0002', n: 1 },
        { file: '0003', n: 1 },
      ]);
    } finally {
      await db.drop();
    }
  });

  it('refuses to run when an applied file has changed', async () => {
    const db = await emptyDatabase();
    try {
      const dir = await folderWith({
        '0001_a.sql': 'create table a (id int);',
        '0002_b.sql': 'create table b (id int);',
      });
      await migrate(db.sql, await loadMigrations(dir));
      await writeFile(join(dir, '0001_a.sql'), 'create table a (id bigint);');
      await writeFile(join(dir, '0003_c.sql'), 'create table c (id int);');

      const run = migrate(db.sql, await loadMigrations(dir));
      await expect(run).rejects.toBeInstanceOf(MigrationError);
      await expect(run).rejects.toThrow(/0001_a\.sql changed after it was applied/);
      // Nothing pending ran either.
      expect(await appliedVersions(db)).toEqual([1, 2]);
      const [c] = await db.sql`select to_regclass('public.c') as c`;
      expect(c!.c).toBeNull();
    } finally {
      await db.drop();
    }
  });

  it('accepts an applied file whose comments changed, and records nothing new for it', async () => {
    const db = await emptyDatabase();
    try {
      const dir = await folderWith({ '0001_a.sql': '-- first words\ncreate table a (id int);' });
      await migrate(db.sql, await loadMigrations(dir));
      await writeFile(join(dir, '0001_a.sql'), '-- better words\n-- over two lines\ncreate table a (id int);\n');
      await writeFile(join(dir, '0002_b.sql'), 'create table b (id int);');

      const result = await migrate(db.sql, await loadMigrations(dir));
      expect(result).toEqual({ applied: ['0002_b.sql'], alreadyApplied: 1, newer: [] });
    } finally {
      await db.drop();
    }
  });

  async function recordWholeText(db: TestDatabase, version: number, text: string): Promise<void> {
    await db.sql`update public.inbox_schema_history set checksum = ${textChecksumOf(text)} where version = ${version}`;
  }

  async function recordedChecksums(db: TestDatabase): Promise<string[]> {
    const rows = await db.sql<{ checksum: string }[]>`select checksum from public.inbox_schema_history order by version`;
    return rows.map((r) => r.checksum);
  }

  it('accepts a record of the whole text while the text is unchanged, and rewrites it as statements', async () => {
    const db = await emptyDatabase();
    try {
      const text = '-- a\ncreate table a (id int);';
      const dir = await folderWith({ '0001_a.sql': text });
      await migrate(db.sql, await loadMigrations(dir));
      await recordWholeText(db, 1, text);

      await expect(migrate(db.sql, await loadMigrations(dir))).resolves.toEqual({ applied: [], alreadyApplied: 1, newer: [] });
      expect(await recordedChecksums(db)).toEqual([checksumOf(text)]);
      // Rewritten: a comment corrected from now on is accepted.
      await writeFile(join(dir, '0001_a.sql'), '-- a, reworded\ncreate table a (id int);');
      await expect(migrate(db.sql, await loadMigrations(dir))).resolves.toEqual({ applied: [], alreadyApplied: 1, newer: [] });
    } finally {
      await db.drop();
    }
  });

  it('accepts a whole-text record of a reworded file only while its statements are the earlier text’s', async () => {
    const db = await emptyDatabase();
    try {
      const earlier = '-- cites a document that is gone\ncreate table a (id int);';
      const dir = await folderWith({ '0001_a.sql': earlier });
      await migrate(db.sql, await loadMigrations(dir));
      await recordWholeText(db, 1, earlier);
      const reworded = new Map([['0001_a.sql', { textChecksum: textChecksumOf(earlier), checksum: checksumOf(earlier) }]]);

      await writeFile(join(dir, '0001_a.sql'), '-- says what it means\ncreate table a (id int);');
      // Without the earlier text named, the record cannot be told from an edit.
      await expect(migrate(db.sql, await loadMigrations(dir, new Map()))).rejects.toThrow(/0001_a\.sql changed after it was applied/);

      await writeFile(join(dir, '0001_a.sql'), '-- says what it means\ncreate table a (id bigint);');
      await expect(migrate(db.sql, await loadMigrations(dir, reworded))).rejects.toThrow(/0001_a\.sql changed after it was applied/);
      expect(await recordedChecksums(db)).toEqual([textChecksumOf(earlier)]);

      await writeFile(join(dir, '0001_a.sql'), '-- says what it means\ncreate table a (id int);');
      await expect(migrate(db.sql, await loadMigrations(dir, reworded))).resolves.toEqual({ applied: [], alreadyApplied: 1, newer: [] });
      expect(await recordedChecksums(db)).toEqual([checksumOf(earlier)]);
    } finally {
      await db.drop();
    }
  });

  it('accepts a database that recorded the whole texts of the project’s files as they were first applied', async () => {
    const db = await emptyDatabase();
    try {
      const migrations = await loadMigrations(MIGRATIONS_DIR);
      await migrate(db.sql, migrations);
      for (const m of migrations) {
        const recorded = m.reworded?.textChecksum ?? m.textChecksum;
        await db.sql`update public.inbox_schema_history set checksum = ${recorded} where version = ${m.version}`;
      }
      await expect(migrate(db.sql, migrations)).resolves.toEqual({ applied: [], alreadyApplied: migrations.length, newer: [] });
      expect(await recordedChecksums(db)).toEqual(migrations.map((m) => m.checksum));
    } finally {
      await db.drop();
    }
  });

  it('refuses to run when an applied file before its newest one was removed', async () => {
    const db = await emptyDatabase();
    try {
      const dir = await folderWith({ '0001_a.sql': 'create table a (id int);', '0002_b.sql': 'create table b (id int);' });
      await migrate(db.sql, await loadMigrations(dir));
      const only = await folderWith({});
      await copyFile(join(dir, '0002_b.sql'), join(only, '0002_b.sql'));
      await expect(migrate(db.sql, await loadMigrations(only))).rejects.toThrow(/0001_a\.sql has no file any more/);
    } finally {
      await db.drop();
    }
  });

  it('finds a database a later release migrated up to date, and changes nothing (a rollback)', async () => {
    const db = await emptyDatabase();
    try {
      const later = await folderWith({ '0001_a.sql': 'create table a (id int);', '0002_b.sql': 'create table b (id int);' });
      await migrate(db.sql, await loadMigrations(later));
      const before = await db.sql`select version, name, checksum, applied_at from public.inbox_schema_history order by version`;
      const earlier = await folderWith({ '0001_a.sql': 'create table a (id int);' });
      const log: string[] = [];

      const result = await migrate(db.sql, await loadMigrations(earlier), { log: (m) => log.push(m) });

      expect(result).toEqual({ applied: [], alreadyApplied: 1, newer: ['0002_b.sql'] });
      expect(log).toEqual(['a later release migrated this database (0002_b.sql): it is up to date for this release; nothing to do']);
      expect(await db.sql`select version, name, checksum, applied_at from public.inbox_schema_history order by version`).toEqual(before);
    } finally {
      await db.drop();
    }
  });

  it('refuses a later release’s database that lacks a file of this release', async () => {
    const db = await emptyDatabase();
    try {
      const later = await folderWith({ '0001_a.sql': 'create table a (id int);', '0003_c.sql': 'create table c (id int);' });
      await migrate(db.sql, await loadMigrations(later));
      const earlier = await folderWith({ '0001_a.sql': 'create table a (id int);', '0002_b.sql': 'create table b (id int);' });
      await expect(migrate(db.sql, await loadMigrations(earlier))).rejects.toThrow(
        /holds 0003_c\.sql of a later release but not 0002_b\.sql of this one/,
      );
      const [b] = await db.sql`select to_regclass('public.b') as b`;
      expect(b!.b).toBeNull();
    } finally {
      await db.drop();
    }
  });

  it('rolls back a failing file and leaves the earlier ones applied', async () => {
    const db = await emptyDatabase();
    try {
      const dir = await folderWith({
        '0001_ok.sql': 'create table ok (id int);',
        '0002_broken.sql': 'create table half (id int); insert into half values (1); select 1/0;',
        '0003_after.sql': 'create table after_broken (id int);',
      });
      const run = migrate(db.sql, await loadMigrations(dir));
      await expect(run).rejects.toBeInstanceOf(MigrationError);
      await expect(run).rejects.toThrow(/0002_broken\.sql failed: division by zero/);
      expect(await appliedVersions(db)).toEqual([1]);
      const [tables] = await db.sql`
        select to_regclass('public.ok') is not null as ok, to_regclass('public.half') is not null as half,
               to_regclass('public.after_broken') is not null as after_broken`;
      expect(tables).toEqual({ ok: true, half: false, after_broken: false });
    } finally {
      await db.drop();
    }
  });

  it('refuses badly named files and duplicate versions', async () => {
    await expect(loadMigrations(await folderWith({ 'create_things.sql': 'select 1;' }))).rejects.toThrow(/does not match NNNN_name\.sql/);
    await expect(loadMigrations(await folderWith({ '0001_a.sql': 'select 1;', '0001_b.sql': 'select 1;' }))).rejects.toThrow(
      /share version 0001/,
    );
  });
});

describe('the ledgers', () => {
  const versionsIn = async (db: TestDatabase, ledger: 'inbox_schema_history' | 'inbox_schema_migrations') =>
    (await db.sql<{ version: number }[]>`select version from ${db.sql('public.' + ledger)} order by version`).map((r) => r.version);

  it('keeps the files up to 0160 in the ledger of the runners of 2026-12-02, and no later one', async () => {
    const db = await emptyDatabase();
    try {
      const migrations = await loadMigrations(MIGRATIONS_DIR);
      await migrate(db.sql, migrations);
      expect(await versionsIn(db, 'inbox_schema_history')).toEqual(migrations.map((m) => m.version));
      expect(await versionsIn(db, 'inbox_schema_migrations')).toEqual(migrations.filter((m) => m.version <= 160).map((m) => m.version));
      expect(migrations.some((m) => m.version > 160)).toBe(true);
    } finally {
      await db.drop();
    }
  });

  it('starts its ledger from the one a database of 2026-12-02 holds, and applies only what is new', async () => {
    const db = await emptyDatabase();
    try {
      const dir = await folderWith({ '0001_a.sql': 'create table a (id int);', '0002_b.sql': 'create table b (id int);' });
      await migrate(db.sql, await loadMigrations(dir));
      // The database as that release's runner left it: its ledger only.
      await db.sql`drop table public.inbox_schema_history`;
      await writeFile(join(dir, '0170_c.sql'), 'create table c (id int);');

      const result = await migrate(db.sql, await loadMigrations(dir));

      expect(result).toEqual({ applied: ['0170_c.sql'], alreadyApplied: 2, newer: [] });
      expect(await versionsIn(db, 'inbox_schema_history')).toEqual([1, 2, 170]);
      expect(await versionsIn(db, 'inbox_schema_migrations')).toEqual([1, 2]);
    } finally {
      await db.drop();
    }
  });
});

describe('npm run migrate, as a process', () => {
  const runMigrate = (databaseUrl: string) =>
    run(process.execPath, ['--import', 'tsx', 'scripts/migrate.ts'], {
      cwd: fileURLToPath(new URL('../../../', import.meta.url)),
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl },
    }).then(
      (r) => ({ code: 0, ...r }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
    );

  it('exits 0 on a database with a later release’s migration recorded, and changes nothing', async () => {
    const db = await emptyDatabase();
    try {
      await migrate(db.sql, await loadMigrations(MIGRATIONS_DIR));
      const later = await folderWith({ '9001_later_release.sql': 'create table public.later_release (id int);' });
      for (const file of (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')))
        await copyFile(join(MIGRATIONS_DIR, file), join(later, file));
      await migrate(db.sql, await loadMigrations(later));
      const before = await db.sql`select * from public.inbox_schema_history order by version`;

      const result = await runMigrate(db.url);

      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(result.stdout).toContain('a later release migrated this database (9001_later_release.sql)');
      expect(await db.sql`select * from public.inbox_schema_history order by version`).toEqual(before);
    } finally {
      await db.drop();
    }
  });

  it('exits 1 when a file before its newest one is missing', async () => {
    const db = await emptyDatabase();
    try {
      await migrate(db.sql, await loadMigrations(MIGRATIONS_DIR));
      // A file recorded between two of the project's, which the project no longer has.
      await db.sql`insert into public.inbox_schema_history (version, name, checksum) values (115, '0115_gone.sql', 'statements-sha256:00')`;

      const result = await runMigrate(db.url);

      expect(result.code).toBe(1);
      expect(result.stderr).toContain('applied migration 0115_gone.sql has no file any more');
    } finally {
      await db.drop();
    }
  });
});
