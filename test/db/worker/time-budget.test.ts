/** The worker within its invocation's time budget: it stops claiming in time and leaves nothing PROCESSING. */
import { beforeEach, describe, expect, it } from 'vitest';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { defineHandler } from '../../../functions/framework';
import { z } from 'zod';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows } from '../../helpers/factories';
import { one, variant, withTrigger, work, workerConfig } from './support';
import { workerRoleOf } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const sql = db.sql;
/** The code under test connects as the worker function does. */
const asWorker = db.as(workerRoleOf(caseProjection));

beforeEach(async () => {
  await sql`truncate integration.consumer_inbox, read_model.case_summary`;
});

const accepted = (n: number, from = 0) =>
  Array.from({ length: n }, (_, i) => ({ payload: { caseId: `case_${from + i}`, acceptedAt: '2026-07-03T09:15:30Z' } }));

async function statusCounts() {
  return sql<{ status: string; attempts: number; n: number }[]>`
    select status, max(attempt_count)::int as attempts, count(*)::int as n
    from integration.consumer_inbox group by status order by status`;
}

/** Remaining time that drops below the margin after `calls` readings. */
function countdown(calls: number): () => number {
  let left = calls;
  return () => (left-- > 0 ? 60_000 : 10);
}

describe('worker time budget', () => {
  it('with less time left than the safety margin it claims nothing', async () => {
    await insertInboxRows(sql, accepted(5));

    const result = await work(asWorker, caseProjection, { remainingMs: () => 500 });

    expect(result).toMatchObject({ claimed: 0, processed: 0 });
    expect(await statusCounts()).toEqual([{ status: 'RECEIVED', attempts: 0, n: 5 }]);
  });

  it('stops claiming when the budget runs out between batches; nothing it claimed stays PROCESSING', async () => {
    await insertInboxRows(sql, accepted(30));

    const result = await work(asWorker, caseProjection, { remainingMs: countdown(4), config: workerConfig({ batchSize: 10 }) });

    expect(result.claimed).toBeGreaterThan(0);
    expect(result.claimed).toBeLessThan(30);
    expect(await statusCounts()).toEqual([
      { status: 'PROCESSED', attempts: 1, n: result.processed },
      { status: 'RECEIVED', attempts: 0, n: 30 - result.processed },
    ]);
  });

  it('releases rows claimed but not started when time runs out inside a batch', async () => {
    // case_0 is the oldest, so it runs first.
    await insertInboxRows(
      sql,
      accepted(9).map((spec, i) => ({ ...spec, receivedSecondsAgo: 100 - i })),
    );
    // case_0 fails with a database error, so the batch's fast path fails and the slow path
    // runs; it reads the remaining time before each half it tries and before each row of a
    // lane it runs row by row.
    const failCase0 = {
      name: 'fail_case_0',
      on: 'read_model.case_summary',
      when: 'after insert',
      body: `if new.case_id = 'case_0' then raise exception 'no' using errcode = '22023'; end if; return new;`,
    };
    await withTrigger(sql, failCase0, async () => {
      // Readings: the claim; the fast path (all 9 lanes); then the slow path reads before it
      // splits a group (is there room to?) and before each half it runs: split 0–8, lanes
      // 0–4 (fail), split, 0–2 (fail), split, 0–1 (fail), lane 0 (fails), lane 0's row
      // (quarantined), lane 1 and lane 2 (processed); the fourteenth, before lanes 3–4,
      // finds the time spent, and lanes 3–8 go back unstarted.
      const result = await work(asWorker, caseProjection, { remainingMs: countdown(13), config: workerConfig({ batchSize: 10 }) });

      expect(result).toMatchObject({ claimed: 9, quarantined: 1, processed: 2, released: 6 });
      expect(await statusCounts()).toEqual([
        { status: 'PROCESSED', attempts: 1, n: 2 },
        { status: 'QUARANTINED', attempts: 1, n: 1 },
        { status: 'RECEIVED', attempts: 0, n: 6 },
      ]);
    });
  });

  it('hands back, before returning, rows whose lease ran out before their batch began', async () => {
    // A trigger makes the claim's lease already expired for one row (as if the worker had
    // stalled between claim and batch): the batch's fence skips it as not ours any more.
    const expireLease = {
      name: 'expire_lease',
      on: 'integration.consumer_inbox',
      when: 'before update',
      body: `if new.status = 'PROCESSING' and new.aggregate_id = 'case_stalled' then
               new.lease_expires_at := now() - interval '1 second';
             end if;
             return new;`,
    };
    await withTrigger(sql, expireLease, async () => {
      await insertInboxRows(sql, [{ payload: { caseId: 'case_stalled', acceptedAt: '2026-07-03T09:15:30Z' } }, ...accepted(2)]);

      const result = await work(asWorker, caseProjection);

      expect(result).toMatchObject({ claimed: 3, processed: 2, lost: 1 });
      const [stalled] = await sql<{ status: string; attempt_count: number; locked_by: string | null }[]>`
        select status, attempt_count, locked_by from integration.consumer_inbox where aggregate_id = 'case_stalled'`;
      expect(stalled).toEqual({ status: 'RECEIVED', attempt_count: 0, locked_by: null });
      const { n } = await one(sql<{ n: number }[]>`select count(*)::int as n from read_model.case_summary where case_id = 'case_stalled'`);
      expect(n).toBe(0);
    });
  });

  it('caps the lease at the time the invocation has left', async () => {
    await insertInboxRows(sql, accepted(1));
    const recorder = variant(caseProjection, {
      handlers: {
        'regulatory.case.accepted.v1': {
          1: defineHandler({
            payload: z.object({ caseId: z.string() }).passthrough(),
            async handle(tx, event) {
              await tx`
                insert into read_model.case_summary (case_id, case_status, last_event_id)
                select ${event.payload.caseId}, 'LEASE ' || extract(epoch from lease_expires_at - locked_at)::int, ${event.eventId}
                from integration.consumer_inbox where inbox_id = ${event.inboxId}`;
            },
          }),
        },
      },
    });

    await work(asWorker, recorder, { remainingMs: () => 20_000, config: workerConfig({ leaseSeconds: 300 }) });

    const [row] = await sql<{ case_status: string }[]>`select case_status from read_model.case_summary`;
    expect(row!.case_status).toBe('LEASE 20');
  });
});
