/**
 * Runs per aggregate and the lanes behind them: a claim takes an aggregate's consecutive
 * due rows in head order and the batch applies them in that order; the first row that does
 * not succeed hands the rest of its run back untouched; lanes follow the rows (nothing
 * queued is ever without a due lane, nothing is left behind once the inbox is drained); no
 * lock is shared by the claimers of a consumer.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CASE_STATUS_CHANGED, caseProjection } from '../../../functions/consumers/case-projection';
import { defineHandler } from '../../../functions/framework';
import { claimDue } from '../../../functions/inbox/claim-due';
import { RetryableError, NonRetryableError } from '../../../functions/lib/errors';
import { lanesOf, processBatch } from '../../../functions/worker/process-batch';
import { newOwnerId } from '../../../functions/worker/run-worker';
import { workerRoleOf } from '../../../functions/lib/database-roles';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows, type InboxRowSpec } from '../../helpers/factories';
import { createAppliedTable, one, variant, work, workerConfig } from './support';

const db = await useTestDatabase();
const sql = db.sql;

await createAppliedTable(sql, 'note_applied', workerRoleOf(caseProjection));
// The code under test runs as its function's role; the arrangement as the owner.
const asWorker = db.as(workerRoleOf(caseProjection));

beforeEach(async () => {
  await sql`truncate integration.consumer_inbox, read_model.case_summary, public.note_applied`;
});

const NOTE = 'test.note.v1';

/**
 * case-projection plus an unversioned note whose handler records its order, and fails on
 * request; quarantine policy continue (hold-aggregate has its own tests).
 */
const withNotes = {
  ...variant(caseProjection, {
    handlers: {
      [NOTE]: {
        1: defineHandler({
          payload: z.object({ fail: z.enum(['transient', 'permanent']).optional() }),
          async handle(tx, event) {
            if (event.payload.fail === 'transient') throw new RetryableError('NOTE_BUSY', 'try again');
            if (event.payload.fail === 'permanent') throw new NonRetryableError('NOTE_BROKEN', 'never works');
            await tx`insert into public.note_applied (aggregate_id, event_id) values (${event.aggregateId}, ${event.eventId})`;
          },
        }),
      },
    },
  }),
  quarantinePolicy: 'continue' as const,
};

const note = (aggregateId: string, seconds: number, payload: Record<string, unknown> = {}): InboxRowSpec => ({
  aggregateId,
  eventType: NOTE,
  payload,
  receivedSecondsAgo: seconds,
});

function statusChanged(caseId: string, version: number): InboxRowSpec {
  return { aggregateId: caseId, aggregateVersion: version, eventType: CASE_STATUS_CHANGED, payload: { caseId, newStatus: `S${version}` } };
}

async function applied(aggregateId: string): Promise<string[]> {
  const rows = await sql<{ event_id: string }[]>`select event_id from public.note_applied where aggregate_id = ${aggregateId} order by seq`;
  return rows.map((r) => r.event_id);
}

async function states(aggregateId: string) {
  return sql<{ event_id: string; status: string; attempt_count: number }[]>`
    select event_id, status, attempt_count from integration.consumer_inbox
    where aggregate_id = ${aggregateId} order by aggregate_version nulls last, received_at`;
}

async function laneCount(): Promise<number> {
  return (await one(sql<{ n: number }[]>`select count(*)::int as n from integration.consumer_lane`)).n;
}

describe('runs', () => {
  it('a claim takes an aggregate’s run in head order, and one batch applies it in that order on the fast path', async () => {
    await sql`insert into read_model.case_summary (case_id, case_status, last_aggregate_version) values ('case_run', 'S1', 1)`;
    await insertInboxRows(
      sql,
      [5, 3, 2, 6, 4].map((v) => statusChanged('case_run', v)),
    );
    const owner = newOwnerId('runs');

    const claim = await claimDue(asWorker, { consumerName: 'case-projection', owner, limit: 10, leaseSeconds: 60 });
    const report = await processBatch(
      { sql: asWorker, consumer: caseProjection, owner, remainingMs: () => 60_000, safetyMarginMs: 1_000 },
      lanesOf(claim),
    );

    expect(claim.lanes).toHaveLength(1);
    expect(claim.rows.map((r) => r.aggregate_version)).toEqual([2, 3, 4, 5, 6]);
    expect(report).toMatchObject({ slowPath: false, released: [] });
    expect(report.completed.map((r) => r.outcome.status)).toEqual(['PROCESSED', 'PROCESSED', 'PROCESSED', 'PROCESSED', 'PROCESSED']);
    expect(
      await one(
        sql<
          { v: number; s: string }[]
        >`select last_aggregate_version::int as v, case_status as s from read_model.case_summary where case_id = 'case_run'`,
      ),
    ).toEqual({ v: 6, s: 'S6' });
  });

  it('a run is at most the run length; the rest follows in later claims, still in order', async () => {
    const rows = await insertInboxRows(
      sql,
      Array.from({ length: 7 }, (_, i) => note('agg_long', 100 - i)),
    );

    const result = await work(asWorker, withNotes, { config: workerConfig({ batchSize: 10, runLength: 3 }) });

    expect(result).toMatchObject({ claimed: 7, processed: 7 });
    expect(await applied('agg_long')).toEqual(rows.map((r) => r.event_id));
  });

  it('a batch is shared out over the lanes that have runs: each run at most its share, so the batch has as few stages as it can', async () => {
    // 5 aggregates × 6 due rows, batch 10, run length 20: runs of 2 (10 / 5), not one run of 6 and one of 4.
    const aggregates = ['agg_a', 'agg_b', 'agg_c', 'agg_d', 'agg_e'];
    await insertInboxRows(
      sql,
      aggregates.flatMap((a, i) => Array.from({ length: 6 }, (_, k) => note(a, 100 - k * 10 - i))),
    );

    const claim = await claimDue(asWorker, {
      consumerName: 'case-projection',
      owner: newOwnerId('runs'),
      limit: 10,
      runLength: 20,
      leaseSeconds: 60,
    });

    expect(claim.lanes.map((l) => [l.aggregateId, l.rows.length])).toEqual(aggregates.map((a) => [a, 2]));
    // Each lane's rows are its head run, in order.
    for (const lane of claim.lanes) {
      const [first, second] = await states(lane.aggregateId);
      expect(lane.rows.map((r) => r.event_id)).toEqual([first!.event_id, second!.event_id]);
    }
  });

  it('one aggregate alone gets a run of the run length, not more', async () => {
    await insertInboxRows(
      sql,
      Array.from({ length: 30 }, (_, k) => note('agg_alone', 100 - k)),
    );

    const claim = await claimDue(asWorker, {
      consumerName: 'case-projection',
      owner: newOwnerId('runs'),
      limit: 100,
      runLength: 20,
      leaseSeconds: 60,
    });

    expect(claim.rows).toHaveLength(20);
  });

  it('a transient failure mid-run: the rows before it are applied, it retries, the rows after it go back untouched', async () => {
    const [a, b, c, d] = await insertInboxRows(sql, [
      note('agg_t', 40),
      note('agg_t', 30),
      note('agg_t', 20, { fail: 'transient' }),
      note('agg_t', 10),
    ]);

    const result = await work(asWorker, withNotes);

    expect(result).toMatchObject({ claimed: 4, processed: 2, retried: 1, released: 1 });
    expect(await applied('agg_t')).toEqual([a!.event_id, b!.event_id]);
    expect(await states('agg_t')).toEqual([
      { event_id: a!.event_id, status: 'PROCESSED', attempt_count: 1 },
      { event_id: b!.event_id, status: 'PROCESSED', attempt_count: 1 },
      { event_id: c!.event_id, status: 'RETRY_PENDING', attempt_count: 1 },
      { event_id: d!.event_id, status: 'RECEIVED', attempt_count: 0 },
    ]);
    // d waits behind c: the lane is due when c retries, not before.
    const lane = await one(sql<{ due_in: number }[]>`
      select extract(epoch from due_at - now())::float8 as due_in from integration.consumer_lane where aggregate_id = 'agg_t'`);
    expect(lane.due_in).toBeGreaterThan(1);
  });

  it('a quarantine mid-run: the rows after it go back untouched and are applied by the next claim', async () => {
    const [a, , c] = await insertInboxRows(sql, [note('agg_q', 30), note('agg_q', 20, { fail: 'permanent' }), note('agg_q', 10)]);

    const result = await work(asWorker, withNotes);

    // The next claim of the same invocation takes c: the quarantine does not hold the aggregate.
    expect(result).toMatchObject({ claimed: 4, processed: 2, quarantined: 1, released: 1 });
    expect(await applied('agg_q')).toEqual([a!.event_id, c!.event_id]);
    expect((await states('agg_q')).map((r) => [r.status, r.attempt_count])).toEqual([
      ['PROCESSED', 1],
      ['QUARANTINED', 1],
      ['PROCESSED', 1],
    ]);
  });
});

describe('lanes', () => {
  it('draining the inbox leaves no lane behind', async () => {
    await insertInboxRows(sql, [
      note('agg_1', 3),
      note('agg_1', 2),
      note('agg_2', 1),
      { aggregateId: 'case_x', payload: { caseId: 'case_x', acceptedAt: '2026-07-03T09:15:30Z' } },
    ]);
    expect(await laneCount()).toBe(3);

    expect(await work(asWorker, withNotes)).toMatchObject({ claimed: 4, processed: 4 });

    expect(await laneCount()).toBe(0);
  });

  it('a row queued while its lane is held is claimed after the batch, not stranded', async () => {
    const [first] = await insertInboxRows(sql, [note('agg_held', 10)]);
    const owner = newOwnerId('held');
    const claim = await claimDue(asWorker, { consumerName: 'case-projection', owner, limit: 10, leaseSeconds: 60 });
    expect(claim.rows.map((r) => r.inbox_id)).toEqual([first!.inbox_id]);

    // Arrives while the first row is in flight: the claim that took the lane never saw it.
    const [second] = await insertInboxRows(sql, [note('agg_held', 0)]);
    await processBatch({ sql: asWorker, consumer: withNotes, owner, remainingMs: () => 60_000, safetyMarginMs: 1_000 }, lanesOf(claim));
    const next = await claimDue(asWorker, { consumerName: 'case-projection', owner: newOwnerId('next'), limit: 10, leaseSeconds: 60 });

    expect(next.rows.map((r) => r.inbox_id)).toEqual([second!.inbox_id]);
  });

  it('a claim never waits for another claimer: a lane locked elsewhere is skipped, the others are claimed', async () => {
    await insertInboxRows(sql, [note('agg_busy', 2), note('agg_free', 1)]);
    const holder = db.client({ max: 1 });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const locked = new Promise<void>((lockedResolve) => {
      void holder.begin(async (tx) => {
        await tx`select 1 from integration.consumer_lane where aggregate_id = 'agg_busy' for update`;
        lockedResolve();
        await held;
      });
    });
    await locked;

    try {
      const claim = await claimDue(asWorker, { consumerName: 'case-projection', owner: newOwnerId('other'), limit: 10, leaseSeconds: 60 });
      expect(claim.rows.map((r) => r.aggregate_id)).toEqual(['agg_free']);
    } finally {
      release();
      await holder.end();
    }
  });

  it('rows queued by any writer (an operator’s UPDATE, here) mark their lane due', async () => {
    const [row] = await insertInboxRows(sql, [
      { ...note('agg_later', 5), status: 'RETRY_PENDING', attemptCount: 1, nextAttemptInSeconds: 3600 },
    ]);
    expect(await work(asWorker, withNotes)).toMatchObject({ claimed: 0 });

    await sql`update integration.consumer_inbox set next_attempt_at = now() where inbox_id = ${row!.inbox_id}`;

    expect(await work(asWorker, withNotes)).toMatchObject({ claimed: 1, processed: 1 });
  });
});
