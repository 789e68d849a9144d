/**
 * The slow path of a batch whose fast path failed: the failing lanes are found by halves,
 * each half a set-based run of its own, and only a failing lane runs row by row. What one
 * fast path would have applied is applied, once, in claim order; a failing row stops its
 * own lane alone.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { defineBatchHandler } from '../../../functions/framework';
import { NonRetryableError, RetryableError } from '../../../functions/lib/errors';
import { workerRoleOf } from '../../../functions/lib/database-roles';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows, type InboxRowSpec } from '../../helpers/factories';
import { createAppliedTable, variant, work } from './support';

const db = await useTestDatabase();
const sql = db.sql;

await createAppliedTable(sql, 'slow_path_applied', workerRoleOf(caseProjection));
const asWorker = db.as(workerRoleOf(caseProjection));

const NOTE = 'test.slow-path-note.v1';

const SLOW_FAILURE_MS = 200;

/** Every handleBatch call: the aggregates of the events it was given, in order. */
const calls: string[][] = [];

beforeEach(async () => {
  calls.length = 0;
  await sql`truncate integration.consumer_inbox, public.slow_path_applied`;
});

/**
 * case-projection plus a set-based note: one INSERT for the events it is given, and a
 * failure for the whole call when any of them asks for one (as a set-based statement
 * fails as a whole); quarantine policy continue.
 */
const withNotes = {
  ...variant(caseProjection, {
    handlers: {
      [NOTE]: {
        1: defineBatchHandler({
          payload: z.object({ fail: z.enum(['transient', 'permanent']).optional(), slow: z.boolean().optional() }),
          async handleBatch(tx, events) {
            calls.push(events.map((e) => e.aggregateId));
            const rows = events.map((e) => ({ aggregate_id: e.aggregateId, event_id: e.eventId }));
            await tx`
              insert into public.slow_path_applied (aggregate_id, event_id)
              select r.aggregate_id, r.event_id
              from json_to_recordset(${JSON.stringify(rows)}::text::json) as r(aggregate_id text, event_id text)`;
            const failing = events.find((e) => e.payload.fail !== undefined);
            // A failure that takes its time, as a statement timeout or a lock wait would.
            if (failing?.payload.slow === true) await new Promise((resolve) => setTimeout(resolve, SLOW_FAILURE_MS));
            if (failing?.payload.fail === 'transient') throw new RetryableError('NOTE_BUSY', 'try again');
            if (failing?.payload.fail === 'permanent') throw new NonRetryableError('NOTE_BROKEN', 'never works');
          },
        }),
      },
    },
  }),
  quarantinePolicy: 'continue' as const,
};

/** One note of aggregate `lane`, received `seconds` ago (claim order: oldest lane first). */
const note = (lane: string, seconds: number, payload: Record<string, unknown> = {}): InboxRowSpec => ({
  aggregateId: lane,
  eventType: NOTE,
  payload,
  receivedSecondsAgo: seconds,
});

const laneName = (n: number) => `lane_${String(n).padStart(2, '0')}`;

async function states() {
  return sql<{ aggregate_id: string; event_id: string; status: string; error_code: string | null }[]>`
    select aggregate_id, event_id, status, error_code from integration.consumer_inbox order by received_at`;
}

async function appliedEvents(): Promise<string[]> {
  const rows = await sql<{ event_id: string }[]>`select event_id from public.slow_path_applied order by seq`;
  return rows.map((r) => r.event_id);
}

describe('the slow path', () => {
  it('one failing lane among 32: found by halves in 12 set-based calls, the other 31 applied once', async () => {
    await insertInboxRows(
      sql,
      Array.from({ length: 32 }, (_, n) => note(laneName(n), 100 - n, n === 21 ? { fail: 'permanent' } : {})),
    );

    const result = await work(asWorker, withNotes);

    // The fast path (32 lanes), then a half that applies and a half that fails at 16, 8, 4,
    // 2 and 1 lanes, then the failing lane row by row: 1 + 2 × 5 + 1. One call per row
    // after the fast path would be 33.
    expect(calls).toHaveLength(12);
    expect(calls[0]).toHaveLength(32);
    expect(calls.filter((c) => c.length === 1 && c[0] === laneName(21))).toHaveLength(2);
    expect(result).toMatchObject({ processed: 31, quarantined: 1 });
    const rows = await states();
    expect(rows.filter((r) => r.status === 'PROCESSED')).toHaveLength(31);
    expect(rows.find((r) => r.aggregate_id === laneName(21))).toMatchObject({ status: 'QUARANTINED', error_code: 'NOTE_BROKEN' });
    // Each processed event's effect once; nothing of the failing one (its savepoints rolled back).
    const applied = await appliedEvents();
    expect(new Set(applied).size).toBe(applied.length);
    expect(applied.sort()).toEqual(
      rows
        .filter((r) => r.status === 'PROCESSED')
        .map((r) => r.event_id)
        .sort(),
    );
  });

  it('two failing lanes: each found and stopped alone, every other lane applied in claim order', async () => {
    await insertInboxRows(
      sql,
      Array.from({ length: 16 }, (_, n) =>
        note(laneName(n), 100 - n, n === 3 ? { fail: 'transient' } : n === 12 ? { fail: 'permanent' } : {}),
      ),
    );

    const result = await work(asWorker, withNotes);

    expect(result).toMatchObject({ processed: 14, retried: 1, quarantined: 1 });
    const rows = await states();
    expect(rows.find((r) => r.aggregate_id === laneName(3))).toMatchObject({ status: 'RETRY_PENDING', error_code: 'NOTE_BUSY' });
    expect(rows.find((r) => r.aggregate_id === laneName(12))).toMatchObject({ status: 'QUARANTINED', error_code: 'NOTE_BROKEN' });
    // The halves ran earlier lanes first: the effects are in claim order.
    const order = new Map(rows.map((r, i) => [r.event_id, i]));
    const applied = (await appliedEvents()).map((id) => order.get(id)!);
    expect(applied).toEqual([...applied].sort((a, b) => a - b));
    expect(applied).toHaveLength(14);
  });

  it('a failing row in a run stops its lane alone: the rows before it applied, the rows after it handed back', async () => {
    await insertInboxRows(sql, [
      note('lane_run', 50),
      note('lane_run', 49, { fail: 'permanent' }),
      note('lane_run', 48),
      ...Array.from({ length: 7 }, (_, n) => note(laneName(n), 40 - n)),
    ]);

    await work(asWorker, withNotes);

    const run = (await states()).filter((r) => r.aggregate_id === 'lane_run');
    // The third row was handed back by the first batch and processed by a later claim.
    expect(run.map((r) => r.status)).toEqual(['PROCESSED', 'QUARANTINED', 'PROCESSED']);
    expect((await states()).filter((r) => r.status === 'PROCESSED')).toHaveLength(9);
    const applied = await appliedEvents();
    expect(new Set(applied).size).toBe(9);
    expect(applied).not.toContain(run[1]!.event_id);
  });

  it('a slow failure with too little time to split: the lanes run row by row', async () => {
    await insertInboxRows(
      sql,
      Array.from({ length: 8 }, (_, n) => note(laneName(n), 100 - n, n === 2 ? { fail: 'permanent', slow: true } : {})),
    );

    // 500 ms to spare beyond the safety margin: splitting 8 lanes could meet the 200 ms
    // failure at each of 4 levels, twice; one run row by row meets it once.
    const result = await work(asWorker, withNotes, { remainingMs: () => 1_500 });

    expect(calls).toHaveLength(9);
    expect(calls.slice(1).every((c) => c.length === 1)).toBe(true);
    expect(result).toMatchObject({ processed: 7, quarantined: 1 });
  });

  it('out of time in the slow path: what needs no handler is still settled, the rest goes back unstarted', async () => {
    await insertInboxRows(sql, [
      note(laneName(0), 100, { fail: 'permanent' }),
      note(laneName(1), 99),
      { aggregateId: laneName(2), eventType: 'test.not-handled.v1', payload: {}, receivedSecondsAgo: 98 },
    ]);
    // Time for the claim and the fast path, none after it.
    let readings = 2;
    const remainingMs = () => (readings-- > 0 ? 60_000 : 10);

    const result = await work(asWorker, withNotes, { remainingMs });

    expect(result).toMatchObject({ claimed: 3, processed: 0, released: 2 });
    const rows = await sql<{ aggregate_id: string; status: string; attempt_count: number }[]>`
      select aggregate_id, status, attempt_count from integration.consumer_inbox order by aggregate_id`;
    expect(rows).toEqual([
      { aggregate_id: laneName(0), status: 'RECEIVED', attempt_count: 0 },
      { aggregate_id: laneName(1), status: 'RECEIVED', attempt_count: 0 },
      { aggregate_id: laneName(2), status: 'QUARANTINED', attempt_count: 1 },
    ]);
    expect(await appliedEvents()).toEqual([]);
  });
});
