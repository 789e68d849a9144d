/**
 * Head of line per aggregate: an aggregate's first non-terminal row, due or not, goes
 * first; later rows wait behind it instead of overtaking a predecessor that is backing off.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CASE_STATUS_CHANGED, caseProjection } from '../../../functions/consumers/case-projection';
import { defineHandler } from '../../../functions/framework';
import { ErrorCodes } from '../../../functions/lib/errors';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows, type InboxRowSpec } from '../../helpers/factories';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import { CASE_TOPIC, ingestFor } from '../ingest/support';
import { createAppliedTable, inboxRow, variant, work } from './support';
import { workerRoleOf } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const sql = db.sql;
/** The code under test connects as the worker function does. */
const asWorker = db.as(workerRoleOf(caseProjection));

await createAppliedTable(sql, 'note_applied', workerRoleOf(caseProjection));

beforeEach(async () => {
  await sql`truncate integration.consumer_inbox, read_model.case_summary, public.note_applied`;
});

const NOTE = 'test.note.v1';

/** case-projection plus an unversioned event type whose handler records the order it ran in. */
const withNotes = variant(caseProjection, {
  handlers: {
    [NOTE]: {
      1: defineHandler({
        payload: z.object({}).passthrough(),
        async handle(tx, event) {
          await tx`insert into public.note_applied (aggregate_id, event_id) values (${event.aggregateId}, ${event.eventId})`;
        },
      }),
    },
  },
});

function statusChanged(caseId: string, version: number, extra: Partial<InboxRowSpec> = {}): InboxRowSpec {
  return {
    aggregateId: caseId,
    aggregateVersion: version,
    eventType: CASE_STATUS_CHANGED,
    payload: { caseId, newStatus: `STATUS_${version}` },
    ...extra,
  };
}

const backingOff = { status: 'RETRY_PENDING' as const, attemptCount: 1, nextAttemptInSeconds: 3600, errorCode: ErrorCodes.DB_TRANSIENT };

async function rowsOf(aggregateId: string) {
  return sql<{ aggregate_version: number | null; status: string; attempt_count: number; locked_by: string | null }[]>`
    select aggregate_version, status, attempt_count, locked_by from integration.consumer_inbox
    where aggregate_id = ${aggregateId} order by aggregate_version nulls last, received_at`;
}

async function caseVersion(caseId: string): Promise<number | undefined> {
  const [row] = await sql<{ v: number }[]>`select last_aggregate_version::int as v from read_model.case_summary where case_id = ${caseId}`;
  return row?.v;
}

describe('head of line per aggregate', () => {
  it('a due v4 waits behind a v3 that is backing off; other aggregates are still claimed; v4 follows v3 in order', async () => {
    await sql`insert into read_model.case_summary (case_id, case_status, last_aggregate_version) values ('case_hol', 'STATUS_2', 2)`;
    const [v3, v4, other] = await insertInboxRows(sql, [
      statusChanged('case_hol', 3, backingOff),
      statusChanged('case_hol', 4),
      { aggregateId: 'case_free', payload: { caseId: 'case_free', acceptedAt: '2026-07-03T09:15:30Z' } },
    ]);
    const before = await rowsOf('case_hol');

    const first = await work(asWorker, caseProjection);

    expect(first).toMatchObject({ claimed: 1, processed: 1 });
    expect(await inboxRow(sql, other!.inbox_id)).toMatchObject({ status: 'PROCESSED' });
    expect(await rowsOf('case_hol')).toEqual(before);
    expect(await inboxRow(sql, v4!.inbox_id)).toMatchObject({ status: 'RECEIVED', attempt_count: 0, error_code: null });

    await sql`update integration.consumer_inbox set next_attempt_at = now() where inbox_id = ${v3!.inbox_id}`;
    const second = await work(asWorker, caseProjection);

    // v3 first (one row of an aggregate per claim), then v4 in the next claim: no gap met.
    expect(second).toMatchObject({ claimed: 2, processed: 2, retried: 0, quarantined: 0 });
    expect(await inboxRow(sql, v3!.inbox_id)).toMatchObject({ status: 'PROCESSED', attempt_count: 2 });
    expect(await inboxRow(sql, v4!.inbox_id)).toMatchObject({ status: 'PROCESSED', attempt_count: 1, error_code: null });
    expect(await caseVersion('case_hol')).toBe(4);
  });

  it('an unversioned event waits behind an earlier one of its aggregate that is backing off', async () => {
    const [earlier, later, other] = await insertInboxRows(sql, [
      { aggregateId: 'agg_1', eventType: NOTE, payload: {}, receivedSecondsAgo: 20, ...backingOff },
      { aggregateId: 'agg_1', eventType: NOTE, payload: {}, receivedSecondsAgo: 10 },
      { aggregateId: 'agg_2', eventType: NOTE, payload: {}, receivedSecondsAgo: 10 },
    ]);

    expect(await work(asWorker, withNotes)).toMatchObject({ claimed: 1, processed: 1 });
    expect(await inboxRow(sql, later!.inbox_id)).toMatchObject({ status: 'RECEIVED', attempt_count: 0 });
    expect(await inboxRow(sql, other!.inbox_id)).toMatchObject({ status: 'PROCESSED' });

    await sql`update integration.consumer_inbox set next_attempt_at = now() where inbox_id = ${earlier!.inbox_id}`;
    expect(await work(asWorker, withNotes)).toMatchObject({ claimed: 2, processed: 2 });

    const applied = await sql<{ event_id: string }[]>`select event_id from public.note_applied where aggregate_id = 'agg_1' order by seq`;
    expect(applied.map((a) => a.event_id)).toEqual([earlier!.event_id, later!.event_id]);
  });

  it('a QUARANTINED predecessor does not block: the next version takes the gap path and ends AGGREGATE_VERSION_GAP', async () => {
    const consumer = caseProjection;
    await sql`insert into read_model.case_summary (case_id, case_status, last_aggregate_version) values ('case_q', 'STATUS_2', 2)`;
    const [, v4] = await insertInboxRows(sql, [
      statusChanged('case_q', 3, { status: 'QUARANTINED', errorCode: ErrorCodes.PAYLOAD_INVALID }),
      statusChanged('case_q', 4),
    ]);

    // Within the bounded wait the gap is held, without spending the attempt budget.
    await work(asWorker, consumer);
    expect(await inboxRow(sql, v4!.inbox_id)).toMatchObject({
      status: 'RETRY_PENDING',
      error_code: ErrorCodes.AGGREGATE_VERSION_GAP,
      attempt_count: 0,
    });

    // Past it (received_at moved back; Postgres owns the clock), it is quarantined.
    await sql`update integration.consumer_inbox
              set received_at = now() - make_interval(secs => ${consumer.retry.versionGapMaxWaitSeconds + 1}), next_attempt_at = now()
              where inbox_id = ${v4!.inbox_id}`;
    await work(asWorker, consumer);
    expect(await inboxRow(sql, v4!.inbox_id)).toMatchObject({ status: 'QUARANTINED', error_code: ErrorCodes.AGGREGATE_VERSION_GAP });
    expect(await caseVersion('case_q')).toBe(2);
  });

  it('unversioned events of one aggregate delivered in one ingest batch apply in offset order, whatever their event ids', async () => {
    // They share received_at (the batch's now()) and are inserted in event_id order, which
    // here runs against the offsets.
    const ids = ['evt_z', 'evt_m', 'evt_a'];
    const note = (eventId: string) => ({
      eventId,
      eventType: NOTE,
      eventVersion: 1,
      occurredAt: '2026-07-03T09:15:30Z',
      producer: 'test',
      aggregateType: 'case',
      aggregateId: 'agg_batch',
      payload: {},
    });
    const event = mskEvent(ids.map((id, i) => mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 100 + i, value: note(id) })));
    expect(await ingestFor(db, withNotes)(event)).toMatchObject({ inserted: 3, response: { batchItemFailures: [] } });

    expect(await work(asWorker, withNotes)).toMatchObject({ claimed: 3, processed: 3 });

    const applied = await sql<
      { event_id: string }[]
    >`select event_id from public.note_applied where aggregate_id = 'agg_batch' order by seq`;
    expect(applied.map((a) => a.event_id)).toEqual(ids);
  });
});
