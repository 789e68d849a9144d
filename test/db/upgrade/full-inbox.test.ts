/**
 * Migrations that fit a full inbox: a million rows, with ingest and a worker running as
 * their own roles throughout (docs/migrations.md, "Bounded waits").
 *
 * - An index built CONCURRENTLY (a no-transaction file) takes no lock that stops the
 *   functions' writes.
 * - A statement that needs the table to itself while a long reader holds it gives up after
 *   lock_timeout, so the functions' statements queued behind its request wait no longer than
 *   that; the file is tried again and applies once the reader is gone.
 *
 * The longest time any function statement waited for a lock is sampled from pg_locks
 * (waitstart) and printed.
 */
import { copyFile, mkdtemp, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getConsumer } from '../../../functions/consumers';
import { migrate } from '../../../functions/lib/migrate';
import { loadMigrations, MIGRATIONS_DIR, NO_TRANSACTION_DIRECTIVE } from '../../../functions/lib/migration-files';
import { workerRoleOf } from '../../../functions/lib/database-roles';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import { useTestDatabase } from '../../helpers/db';
import { ingestFor } from '../ingest/support';
import { work } from '../worker/support';

const ROWS = 1_000_000;
const db = await useTestDatabase();
const caseProjection = getConsumer('case-projection');

beforeAll(async () => {
  // Finished rows of past months, as retention keeps them (payload kept): the bulk a
  // migration's index build or validation reads. Triggers off: finished rows have no lanes.
  await db.sql.begin(async (tx) => {
    await tx`set local session_replication_role = replica`;
    await tx`
      insert into integration.consumer_inbox
        (consumer_name, event_id, event_type, event_version, aggregate_type, aggregate_id, topic_name, partition_no, offset_no,
         producer, occurred_at, received_at, status, attempt_count, processed_at, payload)
      select 'case-projection', 'old_' || g, 'regulatory.case.accepted.v1', 1, 'case', 'case_old_' || (g % 50000),
             'regulatory.case.events.v1', g % 12, g, 'case-command-service',
             now() - interval '30 days', now() - interval '30 days', 'PROCESSED', 1, now() - interval '30 days',
             jsonb_build_object('caseId', 'case_old_' || (g % 50000), 'acceptedAt', '2026-11-01T00:00:00Z')
      from generate_series(1, ${ROWS}) g`;
  });
}, 600_000);

/**
 * Ingest (deferred: stores only) and the worker, in loops, as their own roles, until
 * stopped. What went wrong is collected, not thrown, so that stop() always ends both loops.
 */
function traffic() {
  let running = true;
  const counts = { batches: 0, processed: 0, handedBack: 0, errors: [] as string[] };
  const ingest = ingestFor(db, caseProjection);
  const loop = async (step: (n: number) => Promise<void>) => {
    for (let n = 0; running; n += 1) {
      try {
        await step(n);
      } catch (error) {
        counts.errors.push(String(error));
      }
    }
  };
  const ingesting = loop(async (n) => {
    const caseId = `case_live_${n}`;
    const event = mskEvent([
      mskRecord({
        topic: 'regulatory.case.events.v1',
        partition: n % 12,
        offset: ROWS + n,
        key: caseId,
        value: {
          eventId: `live_${n}`,
          eventType: 'regulatory.case.accepted.v1',
          eventVersion: 1,
          occurredAt: '2026-12-06T00:00:00Z',
          producer: 'case-command-service',
          aggregateType: 'case',
          aggregateId: caseId,
          payload: { caseId, acceptedAt: '2026-12-06T00:00:00Z' },
        },
      }),
    ]);
    const report = await ingest(event);
    counts.batches += 1;
    counts.handedBack += report.response.batchItemFailures.length;
  });
  const working = loop(async () => {
    counts.processed += (await work(db.as(workerRoleOf(caseProjection)), caseProjection)).processed;
    await new Promise((r) => setTimeout(r, 20));
  });
  return {
    async stop() {
      running = false;
      await Promise.all([ingesting, working]);
      return counts;
    },
  };
}

/** The longest a function's statement (a session of an inbox_* role) has waited for a lock, sampled every 25 ms. */
function lockWaits() {
  let running = true;
  let longestMs = 0;
  const sampler = db.client({ max: 1 });
  const sampling = (async () => {
    while (running) {
      const [row] = await sampler<{ ms: number | null }[]>`
        select max(extract(epoch from clock_timestamp() - l.waitstart) * 1000)::float8 as ms
        from pg_locks l join pg_stat_activity a on a.pid = l.pid
        where not l.granted and a.usename like 'inbox\\_%' and a.datname = current_database()`;
      longestMs = Math.max(longestMs, row!.ms ?? 0);
      await new Promise((r) => setTimeout(r, 25));
    }
  })();
  return {
    async stop() {
      running = false;
      await sampling;
      await sampler.end();
      return longestMs;
    },
  };
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Run `action` with the traffic going and the lock waits sampled; both stopped whatever happens. */
async function underLoad<T>(action: () => Promise<T>) {
  const load = traffic();
  const waits = lockWaits();
  let value: T | undefined;
  let failure: unknown;
  try {
    await pause(300);
    value = await action();
    await pause(300);
  } catch (error) {
    failure = error;
  }
  const longestWaitMs = await waits.stop();
  const counts = await load.stop();
  if (failure !== undefined) throw failure;
  return { value: value as T, longestWaitMs, ...counts };
}

/** The project's migrations and this test's files so far, in a folder of their own. */
const extraFiles: Record<string, string> = {};
async function withExtraFile(name: string, text: string) {
  extraFiles[name] = text;
  const dir = await mkdtemp(join(tmpdir(), 'migrations-'));
  for (const file of (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')))
    await copyFile(join(MIGRATIONS_DIR, file), join(dir, file));
  for (const [file, sql] of Object.entries(extraFiles)) await writeFile(join(dir, file), sql);
  return loadMigrations(dir);
}

afterAll(() => db.drop());

describe(`a migration on a full inbox (${ROWS.toLocaleString('en')} rows) while ingest and a worker run`, () => {
  it('builds an index concurrently without holding up the functions', async () => {
    const migrations = await withExtraFile(
      '9001_index_by_aggregate.sql',
      `${NO_TRANSACTION_DIRECTIVE}\ncreate index concurrently if not exists consumer_inbox_by_aggregate on integration.consumer_inbox (consumer_name, aggregate_id);\n`,
    );
    const run = await underLoad(() => migrate(db.sql, migrations));

    console.log(
      `index build on ${ROWS.toLocaleString('en')} rows: ${run.batches} batches ingested and ${run.processed} rows processed meanwhile; ` +
        `longest lock wait of a function statement ${Math.round(run.longestWaitMs)} ms`,
    );
    expect(run.errors).toEqual([]);
    expect(run.handedBack).toBe(0);
    expect(run.value.applied).toEqual(['9001_index_by_aggregate.sql']);
    expect(
      await db.sql`select indisvalid as valid from pg_index where indexrelid = 'integration.consumer_inbox_by_aggregate'::regclass`,
    ).toEqual([{ valid: true }]);
    expect(run.batches).toBeGreaterThan(0);
    expect(run.longestWaitMs).toBeLessThan(2_000);
  }, 600_000);

  it('gives up a lock a long reader holds after lock_timeout, and applies once the reader is gone', async () => {
    const migrations = await withExtraFile(
      '9002_add_note.sql',
      'alter table integration.consumer_inbox add column if not exists operator_note text;\n',
    );
    const log: string[] = [];
    const run = await underLoad(async () => {
      // A report reading the whole inbox for 4 s: its ACCESS SHARE lock keeps ALTER TABLE out.
      const reader = db.client({ max: 1 });
      const reading = reader.begin(async (tx) => {
        await tx`select count(*) from integration.consumer_inbox`;
        await tx`select pg_sleep(4)`;
      });
      await pause(300);
      const result = await migrate(db.sql, migrations, { log: (m) => log.push(m) });
      await reading;
      await reader.end();
      return result;
    });

    const retries = log.filter((l) => l.includes('a lock was not free within 1000 ms'));
    console.log(
      `ALTER TABLE behind a 4 s reader: ${retries.length} attempts gave up after 1 s and were tried again; ` +
        `${run.batches} batches ingested meanwhile; longest lock wait of a function statement ${Math.round(run.longestWaitMs)} ms`,
    );
    expect(run.errors).toEqual([]);
    expect(run.handedBack).toBe(0);
    expect(retries.length).toBeGreaterThan(0);
    expect(run.value.applied).toEqual(['9002_add_note.sql']);
    expect(run.batches).toBeGreaterThan(0);
    // Queued behind the ALTER's request, a function waits for its lock_timeout (1 s) at most, not for the reader.
    expect(run.longestWaitMs).toBeGreaterThan(0);
    expect(run.longestWaitMs).toBeLessThan(2_000);
  }, 600_000);
});
