/**
 * Guarantee 6 (docs/design.md §3): a crashed worker's rows come back after their lease expires and
 * are then processed exactly once, without an operator.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { afterAll, describe, expect, it } from 'vitest';
import { getConsumer } from '../../../functions/consumers/index';
import { runWorker } from '../../../functions/worker/run-worker';
import { useTestDatabase } from '../../helpers/db';
import { caseAcceptedPayload, insertInboxRows } from '../../helpers/factories';
import { quietLogger, reap } from './support';
import { DatabaseRoles, workerRoleOf } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const fixture = fileURLToPath(new URL('./fixtures/crashing-worker.ts', import.meta.url));
const LEASE_SECONDS = 2;

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function scalar(query: Promise<{ n: number }[]>): Promise<number> {
  const [row] = await query;
  return row!.n;
}

describe('reaper: a crashed worker', () => {
  const holder = db.client({ max: 1 });
  afterAll(() => holder.end());

  it('gets its rows back after the lease expires, and a worker then processes each exactly once', async () => {
    // Every write to the projection is logged; a rolled-back write leaves no entry. The log
    // is the test's instrument (SECURITY DEFINER), not something the worker's role may write.
    await db.sql`create table public.effect_log (case_id text not null, at timestamptz not null default now())`;
    await db.sql`
      create function public.log_effect() returns trigger language plpgsql security definer as $$
      begin insert into public.effect_log (case_id) values (new.case_id); return new; end $$`;
    await db.sql`
      create trigger case_summary_effect after insert or update on read_model.case_summary
      for each row execute function public.log_effect()`;
    const rows = await insertInboxRows(
      db.sql,
      Array.from({ length: 6 }, (_, i) => ({ payload: caseAcceptedPayload(`case_crash_${i}`) })),
    );

    // Hold the projection table so the worker's batch blocks in the middle of its transaction.
    let unlock!: () => void;
    const unlocked = new Promise<void>((r) => (unlock = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const lockTx = holder.begin(async (tx) => {
      await tx`lock table read_model.case_summary in exclusive mode`;
      locked();
      await unlocked;
    });
    await isLocked;

    const child = spawn(process.execPath, ['--import', 'tsx', fixture, db.url, String(LEASE_SECONDS)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += String(d)));
    child.stderr.on('data', (d) => (output += String(d)));
    const exited = new Promise<NodeJS.Signals | number | null>((r) => child.on('exit', (code, signal) => r(signal ?? code)));
    try {
      // Mid-batch: all six claimed under the worker's lease, its transaction waiting on our lock.
      await until('the worker waits on the projection lock', async () => {
        const claimed = await scalar(db.sql`
          select count(*)::int as n from integration.consumer_inbox
          where status = 'PROCESSING' and locked_by = 'crashing-worker'`);
        const waiting = await scalar(db.sql`
          select count(*)::int as n from pg_stat_activity
          where datname = current_database() and application_name = 'kafka-inbox' and wait_event_type = 'Lock'`);
        return claimed === rows.length && waiting > 0;
      });
    } catch (error) {
      child.kill('SIGKILL');
      throw new Error(`${(error as Error).message}; worker output: ${output}`, { cause: error });
    } finally {
      child.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
      unlock();
      await lockTx;
    }

    // The killed worker's server session notices its client is gone and rolls back.
    await until(
      'the killed worker has left the database',
      async () =>
        (await scalar(db.sql`
        select count(*)::int as n from pg_stat_activity
        where datname = current_database() and application_name = 'kafka-inbox'`)) === 0,
    );
    // Nothing of the batch committed; its rows are stranded under the dead worker's lease.
    expect(await scalar(db.sql`select count(*)::int as n from public.effect_log`)).toBe(0);
    expect(
      await scalar(db.sql`
        select count(*)::int as n from integration.consumer_inbox
        where status = 'PROCESSING' and locked_by = 'crashing-worker' and attempt_count = 1`),
    ).toBe(rows.length);

    await until(
      'the leases have expired',
      async () =>
        (await scalar(db.sql`
        select count(*)::int as n from integration.consumer_inbox
        where status = 'PROCESSING' and lease_expires_at >= now()`)) === 0,
    );
    const reaped = await reap(db.as(DatabaseRoles.reaper));
    expect(reaped).toMatchObject({ released: rows.length, quarantined: 0 });

    const worked = await runWorker({
      sql: db.as(workerRoleOf({ name: 'case-projection' })),
      consumer: getConsumer('case-projection'),
      config: { worker: { batchSize: 100, safetyMarginMs: 0, leaseSeconds: 60 } },
      logger: quietLogger,
      metrics: new Metrics({ namespace: 'reaper-test' }),
      owner: 'second-worker',
      remainingMs: () => 60_000,
    });

    expect(worked).toMatchObject({ processed: rows.length, retried: 0, quarantined: 0, lost: 0 });
    const inbox = await db.sql<{ status: string; attempt_count: number; error_code: string | null }[]>`
      select status, attempt_count, error_code from integration.consumer_inbox`;
    expect(inbox).toHaveLength(rows.length);
    // Attempt 1 died with the worker; attempt 2 is the one that counted.
    for (const r of inbox) expect(r).toEqual({ status: 'PROCESSED', attempt_count: 2, error_code: null });
    const effects = await db.sql<{ case_id: string; n: number }[]>`
      select case_id, count(*)::int as n from public.effect_log group by case_id order by case_id`;
    expect(effects).toEqual(Array.from({ length: 6 }, (_, i) => ({ case_id: `case_crash_${i}`, n: 1 })));
    expect(await scalar(db.sql`select count(*)::int as n from read_model.case_summary`)).toBe(rows.length);
  });
});
