/**
 * What a producer controls in a record's identity, taken as sent and bounded: header names
 * that are also the names of an object's built-ins, and ids that end up in unique keys
 * (functions/framework/identifiers.ts). An id longer than the bound is poisoned at ingest,
 * ID_TOO_LONG; one at the bound fits every key the inbox, the lanes, the handlers and the
 * outbox build from it, so it is processed like any other.
 */
import { describe, expect, it } from 'vitest';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { caseSla } from '../../../functions/consumers/case-sla';
import { MAX_ID_BYTES } from '../../../functions/framework/identifiers';
import { workerRoleOf } from '../../../functions/lib/database-roles';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import { useTestDatabase } from '../../helpers/db';
import { work } from '../worker/support';
import { CASE_TOPIC, caseAccepted, ingestFor } from './support';

const db = await useTestDatabase();

/** `bytes` bytes of UTF-8 in four-byte characters (a UTF-16 surrogate pair each), then ASCII. */
function idOf(prefix: string, bytes: number): string {
  const wide = '\u{1F600}'.repeat(Math.floor((bytes - prefix.length) / 4));
  return prefix + wide + 'x'.repeat(bytes - prefix.length - wide.length * 2);
}

describe('headers', () => {
  it('stores headers named __proto__, toString and constructor as sent', async () => {
    const event = mskEvent([
      mskRecord({
        topic: CASE_TOPIC,
        partition: 0,
        offset: 1,
        value: caseAccepted('evt_hdr_1'),
        headers: [
          ['__proto__', 'p'],
          ['toString', 't'],
          ['constructor', 'c'],
          ['constructor', 'c2'],
        ],
      }),
    ]);

    expect((await ingestFor(db, 'case-projection')(event)).response).toEqual({ batchItemFailures: [] });

    expect(
      await db.sql`
        select headers ->> '__proto__' as proto, headers ->> 'toString' as to_string, headers -> 'constructor' as ctor,
               array(select jsonb_object_keys(headers) order by 1) as names
        from integration.consumer_inbox where event_id = 'evt_hdr_1'`,
    ).toEqual([{ proto: 'p', to_string: 't', ctor: ['c', 'c2'], names: ['__proto__', 'constructor', 'toString'] }]);
  });
});

describe('ids', () => {
  it('poisons an event id, aggregate type or aggregate id over the bound with ID_TOO_LONG, storing the rest of the batch', async () => {
    const long = idOf('long_', MAX_ID_BYTES + 1);
    const event = mskEvent([
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 10, value: caseAccepted(long) }),
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 11, value: caseAccepted('evt_ids_2', { aggregateId: long }) }),
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 12, value: caseAccepted('evt_ids_3', { aggregateType: long }) }),
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 13, value: caseAccepted('evt_ids_4') }),
    ]);

    const report = await ingestFor(db, 'case-projection')(event);

    expect(report.response).toEqual({ batchItemFailures: [] });
    expect(
      await db.sql`select offset_no, error_code, error_message from integration.consumer_raw_poison where offset_no between 10 and 13 order by offset_no`,
    ).toEqual([
      { offset_no: 10, error_code: 'ID_TOO_LONG', error_message: `eventId: ${MAX_ID_BYTES + 1} bytes, at most ${MAX_ID_BYTES}` },
      { offset_no: 11, error_code: 'ID_TOO_LONG', error_message: `aggregateId: ${MAX_ID_BYTES + 1} bytes, at most ${MAX_ID_BYTES}` },
      { offset_no: 12, error_code: 'ID_TOO_LONG', error_message: `aggregateType: ${MAX_ID_BYTES + 1} bytes, at most ${MAX_ID_BYTES}` },
    ]);
    expect(await db.sql`select event_id from integration.consumer_inbox where offset_no between 10 and 13`).toEqual([
      { event_id: 'evt_ids_4' },
    ]);
  });

  it('processes ids at the bound through every key built from them: inbox, lanes, projection, obligation, audit, outbox', async () => {
    const eventId = idOf('evt_', MAX_ID_BYTES);
    const caseId = idOf('case_', MAX_ID_BYTES);
    const value = caseAccepted(eventId, {
      aggregateType: idOf('type_', MAX_ID_BYTES),
      aggregateId: caseId,
      payload: { caseId, acceptedAt: '2026-07-03T09:15:30Z' },
    });
    const event = mskEvent([mskRecord({ topic: CASE_TOPIC, partition: 1, offset: 20, value })]);
    for (const consumer of ['case-projection', 'case-sla']) {
      expect((await ingestFor(db, consumer)(event)).response).toEqual({ batchItemFailures: [] });
    }

    const projected = await work(db.as(workerRoleOf(caseProjection)), caseProjection);
    const obliged = await work(db.as(workerRoleOf(caseSla)), caseSla);

    expect([projected, obliged]).toMatchObject([
      { retried: 0, quarantined: 0 },
      { retried: 0, quarantined: 0 },
    ]);
    expect(await db.sql`select consumer_name, status from integration.consumer_inbox where event_id = ${eventId} order by 1`).toEqual([
      { consumer_name: 'case-projection', status: 'PROCESSED' },
      { consumer_name: 'case-sla', status: 'PROCESSED' },
    ]);
    expect(await db.sql`select count(*)::int as n from read_model.case_summary where case_id = ${caseId}`).toEqual([{ n: 1 }]);
    expect(await db.sql`select count(*)::int as n from case_core.case_audit where source_event_id = ${eventId}`).toEqual([{ n: 2 }]);
    expect(await db.sql`select count(*)::int as n from integration.outbox where aggregate_id = ${caseId}`).toEqual([{ n: 1 }]);
  });

  it('quarantines a payload id over the bound at once (PAYLOAD_INVALID), never retrying it as a database error', async () => {
    const caseId = idOf('case_', MAX_ID_BYTES + 1);
    const value = caseAccepted('evt_ids_payload', { payload: { caseId, acceptedAt: '2026-07-03T09:15:30Z' } });
    await ingestFor(db, 'case-projection')(mskEvent([mskRecord({ topic: CASE_TOPIC, partition: 2, offset: 30, value })]));

    const result = await work(db.as(workerRoleOf(caseProjection)), caseProjection);

    expect(result).toMatchObject({ quarantined: 1, retried: 0 });
    expect(
      await db.sql`select status, error_code, attempt_count from integration.consumer_inbox where event_id = 'evt_ids_payload'`,
    ).toEqual([{ status: 'QUARANTINED', error_code: 'PAYLOAD_INVALID', attempt_count: 1 }]);
  });
});
