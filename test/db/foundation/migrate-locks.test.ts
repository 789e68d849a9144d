/**
 * The runner's bounded waits: a statement that cannot take its lock within lock_timeout
 * gives up, the file is tried again after a pause, a bounded number of times; files that
 * run outside a transaction (CREATE INDEX CONCURRENTLY), including one cut short; and the
 * runners' own lock, which no function's role can take.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../../functions/lib/migrate';
import { getConsumer } from '../../../functions/consumers';
import { workerRoleOf } from '../../../functions/lib/database-roles';
import { loadMigrations, MigrationError, MIGRATIONS_DIR, NO_TRANSACTION_DIRECTIVE } from '../../../functions/lib/migration-files';
import { createTestDatabase, emptyDatabase, type TestDatabase } from '../../helpers/db';

async function folderWith(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'migrations-'));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}

const recorded = async (db: TestDatabase) =>
  (await db.sql<{ name: string }[]>`select name from public.inbox_schema_history order by version`).map((r) => r.name);

/** Hold ACCESS SHARE on `table` (what any reader takes) in an open transaction until `release` is called. */
function holdReadLock(db: TestDatabase, table: string): { held: Promise<void>; release: () => void; done: Promise<unknown> } {
  const holder = db.client({ max: 1 });
  let release!: () => void;
  let held!: () => void;
  const heldPromise = new Promise<void>((r) => (held = r));
  const released = new Promise<void>((r) => (release = r));
  const done = holder
    .begin(async (tx) => {
      await tx`select * from ${tx(table)} limit 1`;
      held();
      await released;
    })
    .finally(() => holder.end());
  return { held: heldPromise, release, done };
}

describe('lock waits', () => {
  it('gives up on a lock after lock_timeout, pauses, and applies the file once the lock is free', async () => {
    const db = await emptyDatabase();
    try {
      await db.sql`create table public.busy (id int)`;
      const lock = holdReadLock(db, 'public.busy');
      await lock.held;
      const dir = await folderWith({ '0001_add_note.sql': 'alter table public.busy add column note text;' });
      const log: string[] = [];
      const pauses: number[] = [];

      const result = await migrate(db.sql, await loadMigrations(dir), {
        lockTimeoutMs: 100,
        lockAttempts: 5,
        log: (m) => log.push(m),
        // The reader finishes during the second pause.
        sleep: async (ms) => {
          pauses.push(ms);
          if (pauses.length === 2) {
            lock.release();
            await lock.done;
          }
        },
      });

      expect(result.applied).toEqual(['0001_add_note.sql']);
      expect(pauses).toHaveLength(2);
      expect(log.slice(0, 2).map((l) => l.replace(/again in \d+ ms/, 'again in N ms'))).toEqual([
        '0001_add_note.sql: a lock was not free within 100 ms (attempt 1 of 5); again in N ms',
        '0001_add_note.sql: a lock was not free within 100 ms (attempt 2 of 5); again in N ms',
      ]);
      // The pauses grow: 500 ms then 1 s, each with up to half again of jitter.
      expect(pauses[0]).toBeGreaterThanOrEqual(500);
      expect(pauses[0]).toBeLessThanOrEqual(750);
      expect(pauses[1]).toBeGreaterThanOrEqual(1000);
      expect(pauses[1]).toBeLessThanOrEqual(1500);
      const [column] =
        await db.sql`select count(*)::int as n from information_schema.columns where table_name = 'busy' and column_name = 'note'`;
      expect(column).toEqual({ n: 1 });
    } finally {
      await db.drop();
    }
  });

  it('fails after its attempts with nothing of the file applied, and applies it when run again later', async () => {
    const db = await emptyDatabase();
    try {
      await db.sql`create table public.busy (id int)`;
      const lock = holdReadLock(db, 'public.busy');
      await lock.held;
      const dir = await folderWith({
        '0001_first.sql': 'create table public.first (id int);',
        '0002_add_note.sql': 'create table public.beside (id int); alter table public.busy add column note text;',
      });
      const pauses: number[] = [];

      const attempt = migrate(db.sql, await loadMigrations(dir), {
        lockTimeoutMs: 50,
        lockAttempts: 3,
        sleep: async (ms) => void pauses.push(ms),
      });

      await expect(attempt).rejects.toBeInstanceOf(MigrationError);
      await expect(attempt).rejects.toThrow(
        /migration 0002_add_note\.sql could not take its locks in 3 attempts \(lock_timeout 50 ms, SQLSTATE 55P03\)/,
      );
      expect(pauses).toHaveLength(2);
      expect(await recorded(db)).toEqual(['0001_first.sql']);
      const [tables] = await db.sql`select to_regclass('public.beside') as beside`;
      expect(tables).toEqual({ beside: null });

      lock.release();
      await lock.done;
      expect((await migrate(db.sql, await loadMigrations(dir))).applied).toEqual(['0002_add_note.sql']);
    } finally {
      await db.drop();
    }
  });
});

describe('files outside a transaction', () => {
  const concurrently = (name: string, body: string) => ({ [name]: `${NO_TRANSACTION_DIRECTIVE}\n-- why: the table is large\n${body}` });

  it('builds indexes concurrently, statement by statement, and records the file once', async () => {
    const db = await emptyDatabase();
    try {
      await db.sql`create table public.big (id int, note text)`;
      await db.sql`insert into public.big select g, 'n' || g from generate_series(1, 1000) g`;
      const dir = await folderWith({
        ...concurrently(
          '0001_big_indexes.sql',
          "create index concurrently if not exists big_id on public.big (id);\ncreate index concurrently if not exists big_note on public.big (note) where note <> ';';\n",
        ),
      });

      expect((await migrate(db.sql, await loadMigrations(dir))).applied).toEqual(['0001_big_indexes.sql']);
      expect(await migrate(db.sql, await loadMigrations(dir))).toEqual({ applied: [], alreadyApplied: 1, newer: [] });

      expect(
        await db.sql`select c.relname as name, i.indisvalid as valid from pg_index i join pg_class c on c.oid = i.indexrelid where i.indrelid = 'public.big'::regclass order by 1`,
      ).toEqual([
        { name: 'big_id', valid: true },
        { name: 'big_note', valid: true },
      ]);
      expect(await recorded(db)).toEqual(['0001_big_indexes.sql']);
    } finally {
      await db.drop();
    }
  });

  it('rebuilds an index a failed run left invalid, rather than taking it for done', async () => {
    const db = await emptyDatabase();
    try {
      await db.sql`create table public.codes (code text)`;
      await db.sql`insert into public.codes values ('a'), ('a'), ('b')`;
      const dir = await folderWith(
        concurrently('0001_unique_codes.sql', 'create unique index concurrently if not exists codes_code on public.codes (code);'),
      );

      // The duplicate fails the build, which leaves an invalid index behind.
      await expect(migrate(db.sql, await loadMigrations(dir))).rejects.toThrow(
        /0001_unique_codes\.sql failed: could not create unique index/,
      );
      const validity = () => db.sql`select i.indisvalid as valid from pg_index i where i.indexrelid = to_regclass('public.codes_code')`;
      expect(await validity()).toEqual([{ valid: false }]);
      expect(await recorded(db)).toEqual([]);

      await db.sql`delete from public.codes where ctid = (select max(ctid) from public.codes where code = 'a')`;
      const log: string[] = [];
      expect((await migrate(db.sql, await loadMigrations(dir), { log: (m) => log.push(m) })).applied).toEqual(['0001_unique_codes.sql']);

      expect(log).toContain('dropping public.codes_code, left invalid by a build that did not finish');
      expect(await validity()).toEqual([{ valid: true }]);
    } finally {
      await db.drop();
    }
  });
});

describe("the runners' lock", () => {
  it("is a table the functions' roles cannot lock, and the advisory key they can take stalls no deploy", async () => {
    const db = await createTestDatabase();
    try {
      const worker = db.client({ role: workerRoleOf(getConsumer('case-projection')), max: 1 });
      for (const table of ['public.inbox_schema_history', 'integration.consumer_role']) {
        const refused = await worker
          .begin((tx) => tx`lock table ${tx(table)} in access exclusive mode`)
          .catch((e: { code?: string }) => e.code);
        expect(refused, table).toBe('42501');
      }
      // The key the runners took before: any role can hold it, and no runner waits for it now.
      await worker`select pg_advisory_lock(hashtext('kafka-inbox:migrations'))`;
      const dir = await folderWith({ '9001_after.sql': 'create table public.after_lock (id int);' });
      for (const m of await loadMigrations(MIGRATIONS_DIR)) await writeFile(join(dir, m.name), m.sql);

      const result = await migrate(db.sql, await loadMigrations(dir), { lockAttempts: 1 });

      expect(result.applied).toEqual(['9001_after.sql']);
    } finally {
      await db.drop();
    }
  });

  it('refuses a no-transaction file on a pool of one connection, which would wait on itself', async () => {
    const db = await emptyDatabase();
    try {
      const one = db.client({ max: 1 });
      const dir = await folderWith({ '0001_index.sql': `${NO_TRANSACTION_DIRECTIVE}\ncreate table if not exists t (x int);` });
      await expect(migrate(one, await loadMigrations(dir))).rejects.toThrow(
        /0001_index\.sql runs outside a transaction: it needs a pool of two connections/,
      );
    } finally {
      await db.drop();
    }
  });
});
