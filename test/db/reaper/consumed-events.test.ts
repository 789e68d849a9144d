/**
 * Rows leave the inbox at their payload retention; their dedupe key stays in
 * integration.consumed_events until the dedupe window ends (docs/reaper.md). What that
 * must keep true: a redelivery is a duplicate while the key is kept, in either table, and
 * new after the window; a row leaving while its event is redelivered never lets the event
 * in twice; a table that already holds rows moves over in bounded, restartable batches.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_RETENTION } from '../../../functions/framework/types';
import { retireFinished } from '../../../functions/inbox/purge';
import { DatabaseRoles } from '../../../functions/lib/database-roles';
import { batchItemFailure, mskEvent, mskRecord } from '../../../tools/msk-events';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows } from '../../helpers/factories';
import { CASE_TOPIC, caseAccepted, ingestFor } from '../ingest/support';
import { reap } from './support';

const db = await useTestDatabase();

let nextOffset = 1000;

/** One event as its MSK record, delivered as often as the test likes. */
function delivery(eventId: string) {
  return mskEvent([mskRecord({ topic: CASE_TOPIC, partition: 3, offset: nextOffset++, value: caseAccepted(eventId) })]);
}

/** The event, ingested as the function stores it, then finished by a worker `daysAgo` days ago. */
async function processedDaysAgo(eventId: string, daysAgo: number) {
  const event = delivery(eventId);
  const first = await ingestFor(db, 'case-projection')(event);
  expect(first.inserted).toBe(1);
  await db.sql`
    update integration.consumer_inbox
    set status = 'PROCESSED',
        received_at = now() - make_interval(days => ${daysAgo}) - interval '1 minute',
        processed_at = now() - make_interval(days => ${daysAgo})
    where consumer_name = 'case-projection' and event_id = ${eventId}`;
  return event;
}

async function inInbox(eventId: string): Promise<number> {
  const [r] = await db.sql<{ n: number }[]>`select count(*)::int as n from integration.consumer_inbox where event_id = ${eventId}`;
  return r!.n;
}

interface Key {
  consumer_name: string;
  event_id: string;
  inbox_id: string;
  status: string;
  topic_name: string;
  partition_no: number;
  offset_no: number;
  processed_at: Date;
  window_days: number;
}

async function keyOf(eventId: string): Promise<Key | undefined> {
  const [k] = await db.sql<Key[]>`
    select consumer_name, event_id, inbox_id, status, topic_name, partition_no, offset_no, processed_at,
           extract(epoch from dedupe_until - processed_at)::float8 / 86400 as window_days
    from integration.consumed_events where event_id = ${eventId}`;
  return k;
}

const reaper = () => db.as(DatabaseRoles.reaper);

describe('dedupe keys after the row left the inbox', () => {
  it('a redelivery is a duplicate until the dedupe window ends: day 20 a duplicate, day 31 new', async () => {
    const event = await processedDaysAgo('evt-day-20', 20);
    const [{ inbox_id: inboxId } = { inbox_id: '' }] = await db.sql<{ inbox_id: string }[]>`
      select inbox_id from integration.consumer_inbox where event_id = 'evt-day-20'`;

    const moved = await reap(reaper());

    expect(moved.payloadsPurged).toBe(1);
    expect(await inInbox('evt-day-20')).toBe(0);
    expect(await keyOf('evt-day-20')).toMatchObject({
      consumer_name: 'case-projection',
      inbox_id: inboxId,
      status: 'PROCESSED',
      topic_name: CASE_TOPIC,
      partition_no: 3,
      offset_no: event.records[`${CASE_TOPIC}-3`]![0]!.offset,
      window_days: DEFAULT_RETENTION.dedupeWindowDays,
    });

    // Day 20: the row is gone, the key is not.
    const day20 = await ingestFor(db, 'case-projection')(event);
    expect(day20).toMatchObject({ inserted: 0, duplicates: 1, response: { batchItemFailures: [] } });
    expect(await inInbox('evt-day-20')).toBe(0);

    // Day 31: eleven days later the window has ended and the reaper forgets the key.
    await db.sql`
      update integration.consumed_events
      set processed_at = processed_at - interval '11 days', dedupe_until = dedupe_until - interval '11 days'
      where event_id = 'evt-day-20'`;
    const forgot = await reap(reaper());
    expect(forgot.purged).toBe(1);
    expect(await keyOf('evt-day-20')).toBeUndefined();

    const day31 = await ingestFor(db, 'case-projection')(event);
    expect(day31).toMatchObject({ inserted: 1, duplicates: 0 });
    expect(await inInbox('evt-day-20')).toBe(1);
  });

  it('keeps a key per consumer: a key that left for one consumer does not stop another', async () => {
    const event = await processedDaysAgo('evt-two-consumers', 10);
    await reap(reaper());
    expect(await keyOf('evt-two-consumers')).toMatchObject({ consumer_name: 'case-projection' });

    const sla = await ingestFor(db, 'case-sla')(event);

    expect(sla).toMatchObject({ inserted: 1, duplicates: 0 });
  });

  it('a row that leaves while its event is redelivered: the insert that waited on it is refused, the redelivery is a duplicate', async () => {
    const event = await processedDaysAgo('evt-race', 9);
    const mover = db.client({ max: 1, role: DatabaseRoles.reaper });
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    let movedInTx = 0;
    const moving = mover.begin(async (tx) => {
      movedInTx = (await retireFinished(tx, 'case-projection', DEFAULT_RETENTION, 10)).left;
      await committed;
    });
    await until(async () => movedInTx === 1);

    // The ingest's statement sees the row (its delete is not committed) and no key; its
    // insert waits on the row's unique-key entry until the move commits.
    const ingesting = ingestFor(db, 'case-projection')(event);
    await until(async () => {
      const [w] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and query like '%consumer_inbox%'`;
      return w!.n > 0;
    });
    commit();
    await moving;
    const report = await ingesting;

    expect(report.inserted).toBe(0);
    expect(report.response.batchItemFailures).toEqual([batchItemFailure(CASE_TOPIC, 3, event.records[`${CASE_TOPIC}-3`]![0]!.offset)]);
    expect(await inInbox('evt-race')).toBe(0);
    // The mapping redelivers the batch: the key is there now.
    const again = await ingestFor(db, 'case-projection')(event);
    expect(again).toMatchObject({ inserted: 0, duplicates: 1, response: { batchItemFailures: [] } });
    expect(await inInbox('evt-race')).toBe(0);
    await mover.end();
  });
});

describe('moving a table that already holds rows', () => {
  it('moves rows whose payload was purged in place, in bounded batches, skipping a locked row until a later run', async () => {
    await db.sql`delete from integration.consumer_inbox`;
    await db.sql`delete from integration.consumed_events`;
    // As the reaper of an earlier release left them: purged in place inside the window, one
    // purged row past it, finished rows past the payload retention not yet purged, and recent ones.
    const legacy = await insertInboxRows(
      db.sql,
      Array.from({ length: 5 }, (_, i) => ({ status: 'PROCESSED' as const, eventId: `evt-legacy-${i}`, offset: 500 + i })),
    );
    const [pastWindow] = await insertInboxRows(db.sql, [{ status: 'PROCESSED', eventId: 'evt-legacy-past' }]);
    const unpurged = await insertInboxRows(
      db.sql,
      Array.from({ length: 3 }, (_, i) => ({ status: 'IGNORED' as const, eventId: `evt-unpurged-${i}` })),
    );
    const recent = await insertInboxRows(db.sql, [{ status: 'PROCESSED', eventId: 'evt-recent' }]);
    await db.sql`
      update integration.consumer_inbox
      set processed_at = now() - interval '17 days', received_at = now() - interval '17 days 1 minute',
          payload = '{}', headers = '{}', payload_purged_at = now() - interval '10 days'
      where inbox_id = any(${legacy.map((r) => r.inbox_id)}::uuid[])`;
    await db.sql`
      update integration.consumer_inbox
      set processed_at = now() - interval '40 days', received_at = now() - interval '40 days 1 minute',
          payload = '{}', headers = '{}', payload_purged_at = now() - interval '33 days'
      where inbox_id = ${pastWindow!.inbox_id}`;
    await db.sql`
      update integration.consumer_inbox
      set processed_at = now() - interval '9 days', received_at = now() - interval '9 days 1 minute'
      where inbox_id = any(${unpurged.map((r) => r.inbox_id)}::uuid[])`;
    await db.sql`update integration.consumer_inbox set processed_at = now() - interval '1 day' where inbox_id = ${recent[0]!.inbox_id}`;

    // Another session holds one legacy row (an operator's query, say): the run skips it, never waits.
    const holder = db.client({ max: 1 });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let locked = false;
    const holding = holder.begin(async (tx) => {
      await tx`select 1 from integration.consumer_inbox where inbox_id = ${legacy[0]!.inbox_id} for update`;
      locked = true;
      await released;
    });
    await until(async () => locked);

    const first = await reap(reaper(), { config: { reaper: { batchSize: 2, safetyMarginMs: 0 } } });
    release();
    await holding;
    await holder.end();

    expect(first).toMatchObject({ payloadsPurged: 8, purged: 1, complete: true });
    expect((await db.sql`select event_id from integration.consumer_inbox order by event_id`).map((r) => r.event_id)).toEqual([
      'evt-legacy-0',
      'evt-recent',
    ]);

    const second = await reap(reaper(), { config: { reaper: { batchSize: 2, safetyMarginMs: 0 } } });

    expect(second).toMatchObject({ payloadsPurged: 1, purged: 0, complete: true });
    const keys = await db.sql<{ event_id: string; status: string; window_days: number }[]>`
      select event_id, status, extract(epoch from dedupe_until - processed_at)::float8 / 86400 as window_days
      from integration.consumed_events order by event_id`;
    expect(keys).toEqual([
      ...legacy.map((r) => ({ event_id: r.event_id, status: 'PROCESSED', window_days: 30 })),
      ...unpurged.map((r) => ({ event_id: r.event_id, status: 'IGNORED', window_days: 30 })),
    ]);
    expect((await db.sql`select event_id from integration.consumer_inbox`).map((r) => r.event_id)).toEqual(['evt-recent']);

    // A moved legacy key still stops its redelivery; the one past its window does not.
    const legacyAgain = await ingestFor(
      db,
      'case-projection',
    )(mskEvent([mskRecord({ topic: 'regulatory.case.events.v1', partition: 0, offset: 1, value: caseAccepted('evt-legacy-3') })]));
    expect(legacyAgain).toMatchObject({ inserted: 0, duplicates: 1 });
    const pastAgain = await ingestFor(
      db,
      'case-projection',
    )(mskEvent([mskRecord({ topic: 'regulatory.case.events.v1', partition: 0, offset: 2, value: caseAccepted('evt-legacy-past') })]));
    expect(pastAgain).toMatchObject({ inserted: 1, duplicates: 0 });
  });
});

async function until(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}
