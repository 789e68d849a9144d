/**
 * What happens when the inbox refuses a batch for a reason that is neither the
 * infrastructure nor one record's data (a bug, a schema drift): a trigger stands in for it.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PoisonCodes } from '../../../functions/ingest/poison-codes';
import { useTestDatabase } from '../../helpers/db';
import { batchItemFailure, mskEvent, mskRecord } from '../../../tools/msk-events';
import { CASE_TOPIC, caseAccepted, inboxRows, ingestFor, PAYMENT_TOPIC, paymentCompleted, poisonRows, truncateAll } from './support';

const db = await useTestDatabase();

beforeEach(() => truncateAll(db.sql));

afterEach(async () => {
  await db.sql`drop trigger if exists refuse on integration.consumer_inbox`;
  await db.sql`drop trigger if exists refuse on integration.consumer_raw_poison`;
});

async function refuse(table: 'consumer_inbox' | 'consumer_raw_poison', when: 'always' | 'processing'): Promise<void> {
  await db.sql`
    create or replace function public.refuse_for_test() returns trigger language plpgsql as $$
    begin
      if tg_argv[0] = 'always' then
        raise exception 'refused by test trigger' using errcode = 'P0001';
      end if;
      if to_jsonb(new) ->> 'status' = 'PROCESSING' then
        raise exception 'refused by test trigger' using errcode = 'P0001';
      end if;
      return new;
    end $$`;
  await db.sql.unsafe(
    `create trigger refuse before insert on integration.${table} for each row execute function public.refuse_for_test('${when}')`,
  );
}

describe('the store ladder', () => {
  it('puts every record of a batch the inbox refuses into poison (INGEST_FAILED), so no partition loops', async () => {
    await refuse('consumer_inbox', 'always');
    const a = caseAccepted();
    const event = mskEvent([
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 1, value: a }),
      mskRecord({ topic: CASE_TOPIC, partition: 1, offset: 9, value: 'not json' }),
    ]);

    const report = await ingestFor(db, 'case-projection')(event);

    expect(report).toMatchObject({ strategy: 'poison-all', inserted: 0, poisoned: 2, response: { batchItemFailures: [] } });
    expect(await inboxRows(db.sql)).toEqual([]);
    expect(await poisonRows(db.sql)).toMatchObject([
      { partition_no: 0, offset_no: 1, error_code: PoisonCodes.INGEST_FAILED, raw_encoding: 'utf8', raw_value: JSON.stringify(a) },
      { partition_no: 1, offset_no: 9, error_code: PoisonCodes.INVALID_JSON },
    ]);
  });

  it('stores an inline batch for the worker when processing it inline fails outside the handlers', async () => {
    await refuse('consumer_inbox', 'processing');
    const e = paymentCompleted();

    const report = await ingestFor(
      db,
      'notification-service',
    )(mskEvent([mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 4, value: e })]));

    expect(report).toMatchObject({ strategy: 'deferred', inserted: 1, processed: 0, response: { batchItemFailures: [] } });
    expect(await inboxRows(db.sql)).toMatchObject([{ event_id: e.event_id, status: 'RECEIVED' }]);
    expect(await db.sql`select 1 from public.notification_jobs`).toHaveLength(0);
  });

  it('reports the batch back when not even poison can be written', async () => {
    await refuse('consumer_inbox', 'always');
    await refuse('consumer_raw_poison', 'always');
    const event = mskEvent([
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 1, value: caseAccepted() }),
      mskRecord({ topic: CASE_TOPIC, partition: 2, offset: 5, value: caseAccepted() }),
    ]);

    const report = await ingestFor(db, 'case-projection')(event);

    expect(report.strategy).toBeNull();
    expect(report.response.batchItemFailures).toEqual([batchItemFailure(CASE_TOPIC, 0, 1), batchItemFailure(CASE_TOPIC, 2, 5)]);
    expect(await poisonRows(db.sql)).toEqual([]);
  });
});
