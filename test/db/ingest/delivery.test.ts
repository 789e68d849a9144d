import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from '../../helpers/db';
import { freePort } from '../../../tools/embedded-postgres';
import { batchItemFailure, mskEvent, mskRecord, spreadRecords } from '../../../tools/msk-events';
import { CASE_TOPIC, caseAccepted, inboxRows, ingestFor, ingestRole, poisonRows, truncateAll } from './support';
import postgres from 'postgres';
import { TYPES, type Sql } from '../../../functions/lib/db';

const db = await useTestDatabase();

beforeEach(() => truncateAll(db.sql));

function batch(count: number, partitions: number) {
  return spreadRecords({ topic: CASE_TOPIC, partitions, count, firstOffset: 40, value: (n) => caseAccepted(`evt-${n}`) });
}

describe('redelivery', () => {
  it('stores one row per event when four invocations (four containers) deliver the same batch at once', async () => {
    const event = mskEvent(batch(400, 4));
    const containers = [0, 1, 2, 3].map(() => ingestFor(db.client({ max: 2, role: ingestRole('case-projection') }), 'case-projection'));

    const reports = await Promise.all(containers.map((ingest) => ingest(event)));

    for (const r of reports) expect(r.response).toEqual({ batchItemFailures: [] });
    expect(reports.reduce((n, r) => n + r.inserted, 0)).toBe(400);
    expect(reports.reduce((n, r) => n + r.duplicates, 0)).toBe(3 * 400);
    const rows = await inboxRows(db.sql);
    expect(rows).toHaveLength(400);
    expect(new Set(rows.map((r) => r.event_id)).size).toBe(400);
  });

  it('gives each consumer of the topic its own row for the same event', async () => {
    const event = mskEvent([mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 1, value: caseAccepted('evt-shared') })]);

    await ingestFor(db, 'case-projection')(event);
    await ingestFor(db, 'case-sla')(event);
    await ingestFor(db, 'case-sla')(event);

    expect((await inboxRows(db.sql)).map((r) => [r.consumer_name, r.event_id, r.status])).toEqual([
      ['case-projection', 'evt-shared', 'RECEIVED'],
      ['case-sla', 'evt-shared', 'RECEIVED'],
    ]);
  });
});

describe('an unreachable database', () => {
  let unreachable: Sql;
  afterAll(() => unreachable?.end({ timeout: 1 }));

  it('reports every partition at its first offset, and the redelivery stores everything once', async () => {
    const port = await freePort(); // nothing listens there
    unreachable = postgres(`postgres://postgres@127.0.0.1:${port}/nowhere`, {
      connect_timeout: 1,
      max: 1,
      types: TYPES,
      onnotice: () => {},
    }) as unknown as Sql;
    const records = batch(30, 3);
    records.push(mskRecord({ topic: CASE_TOPIC, partition: 7, offset: 900, value: null })); // poison waits too
    const event = mskEvent(records);

    const down = await ingestFor(unreachable, 'case-projection')(event);

    expect(down.strategy).toBeNull();
    expect(down.response.batchItemFailures).toEqual([
      batchItemFailure(CASE_TOPIC, 0, 40),
      batchItemFailure(CASE_TOPIC, 1, 40),
      batchItemFailure(CASE_TOPIC, 2, 40),
      batchItemFailure(CASE_TOPIC, 7, 900),
    ]);
    expect(await inboxRows(db.sql)).toEqual([]);

    const back = ingestFor(db, 'case-projection');
    const first = await back(event);
    const second = await back(event);

    expect(first).toMatchObject({ response: { batchItemFailures: [] }, inserted: 30, poisoned: 1 });
    expect(second).toMatchObject({ response: { batchItemFailures: [] }, inserted: 0, duplicates: 30, poisoned: 0 });
    expect(await inboxRows(db.sql)).toHaveLength(30);
    expect(await poisonRows(db.sql)).toHaveLength(1);
  });

  it('reports the batch when a statement times out (57014), storing none of it', async () => {
    // Another session holds the unique key of one event of the batch: the insert waits on it.
    const blocker = db.client({ max: 1 });
    const timingOut = db.client({ max: 1, role: ingestRole('case-projection'), connection: { statement_timeout: 300 } });
    const event = mskEvent(batch(20, 2));
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holding = blocker
      .begin(async (tx) => {
        await tx`insert into integration.consumer_inbox
                 (consumer_name, event_id, event_type, event_version, aggregate_type, aggregate_id,
                  topic_name, partition_no, offset_no, producer, occurred_at, status, payload)
               values ('case-projection', 'evt-5', 't', 1, 'case', 'c', ${CASE_TOPIC}, 1, 42, 'p', now(), 'RECEIVED', '{}')`;
        locked();
        await held;
        throw new Error('roll back on purpose');
      })
      .catch(() => undefined);
    await isLocked;

    const report = await ingestFor(timingOut, 'case-projection')(event);
    release();
    await holding;

    expect(report.response.batchItemFailures).toEqual([batchItemFailure(CASE_TOPIC, 0, 40), batchItemFailure(CASE_TOPIC, 1, 40)]);
    expect(await inboxRows(db.sql)).toEqual([]);
  });
});

describe('a large batch', () => {
  it('stores 5,000 records over 8 partitions in a constant number of statements', async () => {
    let statements = 0;
    const counted = db.client({ max: 1, role: ingestRole('case-projection'), debug: () => void statements++ });
    const ingest = ingestFor(counted, 'case-projection');
    const small = mskEvent([
      ...spreadRecords({ topic: CASE_TOPIC, partitions: 8, count: 16, firstOffset: 0, value: (n) => caseAccepted(`small-${n}`) }),
      mskRecord({ topic: CASE_TOPIC, partition: 9, offset: 100, value: null }),
    ]);
    await ingest(mskEvent([mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 0, value: caseAccepted() })])); // connects: type fetch
    statements = 0;
    await ingest(small);
    const forSmall = statements;
    statements = 0;
    const records = spreadRecords({ topic: CASE_TOPIC, partitions: 8, count: 5000, value: (n) => caseAccepted(`big-${n}`) });
    records[1234] = mskRecord({ topic: CASE_TOPIC, partition: 9, offset: 0, value: 'poison' });

    const report = await ingest(mskEvent(records));

    expect(report).toMatchObject({ inserted: 4999, poisoned: 1, strategy: 'direct' });
    expect(await db.sql`select count(*)::int as n from integration.consumer_inbox`).toEqual([{ n: 1 + 16 + 4999 }]);
    // begin, the inbox insert, the poison insert, commit: the same for 16 records as for 5,000.
    expect(statements).toBeLessThanOrEqual(4);
    expect(statements).toBe(forSmall);
  });
});

describe('a batch without poison', () => {
  it('is one statement, however large, and every row gets its own record payload and headers', async () => {
    let statements = 0;
    const counted = db.client({ max: 1, role: ingestRole('case-projection'), debug: () => void statements++ });
    const ingest = ingestFor(counted, 'case-projection');
    await ingest(mskEvent([mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 0, value: caseAccepted('evt-first') })])); // connects: type fetch
    // Payloads of different lengths, with what JSON and the envelope split must carry through:
    // quotes, backslashes, escaped control characters, non-ASCII, nesting, exact big numbers.
    const note = (n: number) => `"q" \\ \n\t\u001e ü ✓ 𝄞 ${'y'.repeat(n % 7 === 0 ? 3000 : n)}`;
    const records = spreadRecords({
      topic: CASE_TOPIC,
      partitions: 8,
      count: 2000,
      firstOffset: 10,
      value: (n) =>
        caseAccepted(`evt-${n}`, { aggregateId: `agg-${n}`, payload: { n, note: note(n), nested: { list: [n, { deep: `d${n}` }] } } }),
      headers: (n) => ({ traceparent: `tp-${n}` }),
    });
    const event = mskEvent(records);
    event.records[`${CASE_TOPIC}-3`]![5]!.value = Buffer.from(
      JSON.stringify(caseAccepted('evt-big', { aggregateId: 'agg-big' })).replace(
        '"payload":{',
        '"payload":{"amount":12345678901234567890.5,',
      ),
    ).toString('base64');

    statements = 0;
    const report = await ingest(event);

    expect(report).toMatchObject({ inserted: 2000, poisoned: 0, strategy: 'direct' });
    expect(statements).toBe(1);
    const mismatched = await db.sql<{ event_id: string }[]>`
      select event_id from integration.consumer_inbox
      where event_id not in ('evt-first', 'evt-big')
        and (payload is null or headers is null
          or aggregate_id <> 'agg-' || (payload ->> 'n')
          or 'evt-' || (payload ->> 'n') <> event_id
          or payload -> 'nested' -> 'list' ->> 0 <> payload ->> 'n'
          or headers ->> 'traceparent' <> 'tp-' || (payload ->> 'n'))`;
    expect(mismatched).toEqual([]);
    const notes = await db.sql<{ n: number; note: string }[]>`
      select (payload ->> 'n')::int as n, payload ->> 'note' as note from integration.consumer_inbox
      where event_id not in ('evt-first', 'evt-big') order by 1`;
    expect(notes).toHaveLength(1999);
    for (const row of notes) expect(row.note).toBe(note(row.n));
    const [big] = await db.sql<{ aggregate_id: string; amount: string }[]>`
      select aggregate_id, payload ->> 'amount' as amount from integration.consumer_inbox where event_id = 'evt-big'`;
    expect(big).toEqual({ aggregate_id: 'agg-big', amount: '12345678901234567890.5' });
  });
});
