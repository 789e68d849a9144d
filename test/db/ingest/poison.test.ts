import { beforeEach, describe, expect, it } from 'vitest';
import { PoisonCodes } from '../../../functions/ingest/poison-codes';
import { useTestDatabase } from '../../helpers/db';
import { mskEvent, mskRecord, type RecordSpec } from '../../../tools/msk-events';
import { CASE_TOPIC, caseAccepted, inboxRows, ingestFor, poisonRows, truncateAll } from './support';

const db = await useTestDatabase();
const MAX = 4096;
const ingest = ingestFor(db, 'case-projection', MAX);

beforeEach(() => truncateAll(db.sql));

type Bad = Omit<RecordSpec, 'topic' | 'partition' | 'offset'>;

const cases: Array<{ name: string; bad: Bad; code: string; encoding: string; raw?: string | null; message?: RegExp }> = [
  { name: 'a tombstone (no value)', bad: { value: null }, code: PoisonCodes.TOMBSTONE, encoding: 'none', raw: null },
  { name: 'a tombstone (empty value)', bad: { rawValue: '' }, code: PoisonCodes.TOMBSTONE, encoding: 'none', raw: null },
  {
    name: 'a value that is not base64',
    bad: { rawValue: 'eyJh*not base64' },
    code: PoisonCodes.INVALID_BASE64,
    encoding: 'base64',
    raw: 'eyJh*not base64',
  },
  { name: 'base64 without its padding', bad: { rawValue: 'eyJhIjox' + 'fQ' }, code: PoisonCodes.INVALID_BASE64, encoding: 'base64' },
  {
    name: 'bytes that are not UTF-8',
    bad: { value: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]) },
    code: PoisonCodes.INVALID_UTF8,
    encoding: 'base64',
    raw: 'e//+fQ==',
  },
  {
    name: 'text that is not JSON',
    bad: { value: '{"eventId": "e1", ' },
    code: PoisonCodes.INVALID_JSON,
    encoding: 'utf8',
    raw: '{"eventId": "e1", ',
  },
  {
    name: 'JSON with a raw NUL byte',
    bad: { value: 'nul\u0000here' },
    code: PoisonCodes.INVALID_JSON,
    encoding: 'base64',
    raw: Buffer.from('nul\u0000here').toString('base64'),
  },
  { name: 'a JSON array', bad: { value: [1, 2] }, code: PoisonCodes.NOT_AN_OBJECT, encoding: 'utf8', raw: '[1,2]' },
  { name: 'a JSON string', bad: { value: '"evt"' }, code: PoisonCodes.NOT_AN_OBJECT, encoding: 'utf8' },
  {
    name: 'an envelope without eventId',
    bad: { value: { ...caseAccepted(), eventId: undefined } },
    code: PoisonCodes.ENVELOPE_INVALID,
    encoding: 'utf8',
    message: /^eventId: /,
  },
  {
    name: 'eventVersion 0',
    bad: { value: caseAccepted(undefined, { eventVersion: 0 }) },
    code: PoisonCodes.ENVELOPE_INVALID,
    encoding: 'utf8',
    message: /^eventVersion: /,
  },
  {
    name: 'eventVersion 1.5',
    bad: { value: caseAccepted(undefined, { eventVersion: 1.5 }) },
    code: PoisonCodes.ENVELOPE_INVALID,
    encoding: 'utf8',
    message: /^eventVersion: /,
  },
  {
    name: 'eventVersion as a string',
    bad: { value: caseAccepted(undefined, { eventVersion: '1' }) },
    code: PoisonCodes.ENVELOPE_INVALID,
    encoding: 'utf8',
    message: /^eventVersion: /,
  },
  {
    name: 'occurredAt not a datetime',
    bad: { value: caseAccepted(undefined, { occurredAt: 'yesterday' }) },
    code: PoisonCodes.ENVELOPE_INVALID,
    encoding: 'utf8',
    message: /^occurredAt: /,
  },
  {
    name: 'a payload that is an array',
    bad: { value: caseAccepted(undefined, { payload: [] }) },
    code: PoisonCodes.ENVELOPE_INVALID,
    encoding: 'utf8',
    message: /^payload: /,
  },
  {
    name: 'aggregateVersion 0',
    bad: { value: caseAccepted(undefined, { aggregateVersion: 0 }) },
    code: PoisonCodes.ENVELOPE_INVALID,
    encoding: 'utf8',
    message: /^aggregateVersion: /,
  },
  {
    name: 'a value over the size limit',
    bad: { value: caseAccepted(undefined, { payload: { blob: 'x'.repeat(MAX) } }) },
    code: PoisonCodes.PAYLOAD_TOO_LARGE,
    encoding: 'utf8',
    message: /over the limit of 4096/,
  },
  {
    name: 'a \\u0000 inside a payload string',
    bad: { value: caseAccepted(undefined, { payload: { caseId: 'c1', note: 'a\u0000b' } }) },
    code: PoisonCodes.UNSTORABLE_VALUE,
    encoding: 'utf8',
    message: /^payload\.note: /,
  },
  {
    name: 'a \\u0000 inside a member name',
    bad: { value: caseAccepted(undefined, { payload: { 'k\u0000': 1 } }) },
    code: PoisonCodes.UNSTORABLE_VALUE,
    encoding: 'utf8',
    message: /member name/,
  },
  {
    name: 'an unpaired surrogate',
    bad: { value: caseAccepted(undefined, { correlationId: '\ud800x' }) },
    code: PoisonCodes.UNSTORABLE_VALUE,
    encoding: 'utf8',
    message: /^correlationId: /,
  },
];

describe('a poison record', () => {
  it.each(cases)('$name → one poison row $code, its neighbours stored, redelivery adds nothing', async (c) => {
    const before = caseAccepted();
    const after = caseAccepted();
    const event = mskEvent([
      mskRecord({ topic: CASE_TOPIC, partition: 3, offset: 100, value: before }),
      mskRecord({
        topic: CASE_TOPIC,
        partition: 3,
        offset: 101,
        key: 'case-key',
        headers: { traceparent: 't-1' },
        timestamp: 1_780_000_000_000,
        ...c.bad,
      }),
      mskRecord({ topic: CASE_TOPIC, partition: 3, offset: 102, value: after }),
    ]);

    const first = await ingest(event);

    expect(first.response).toEqual({ batchItemFailures: [] });
    expect(first).toMatchObject({ received: 3, inserted: 2, poisoned: 1, poisonRecords: 1, duplicates: 0, strategy: 'direct' });
    expect((await inboxRows(db.sql)).map((r) => [r.event_id, r.offset_no])).toEqual([
      [before.eventId, 100],
      [after.eventId, 102],
    ]);
    const [poison, ...more] = await poisonRows(db.sql);
    expect(more).toEqual([]);
    expect(poison).toMatchObject({
      consumer_name: 'case-projection',
      partition_no: 3,
      offset_no: 101,
      error_code: c.code,
      raw_encoding: c.encoding,
      record_key: 'case-key',
      record_key_encoding: 'utf8',
      headers: { traceparent: 't-1' },
      record_timestamp: new Date(1_780_000_000_000),
    });
    if (c.raw !== undefined) expect(poison!.raw_value).toBe(c.raw);
    if (c.message) expect(poison!.error_message).toMatch(c.message);

    const again = await ingest(event);

    expect(again.response).toEqual({ batchItemFailures: [] });
    expect(again).toMatchObject({ inserted: 0, duplicates: 2, poisoned: 0, poisonRecords: 1 });
    expect(await inboxRows(db.sql)).toHaveLength(2);
    expect(await poisonRows(db.sql)).toHaveLength(1);
  });

  it('keeps the raw value of a poison record as text, and its key and headers as base64 when they are not UTF-8', async () => {
    const event = mskEvent([
      mskRecord({
        topic: CASE_TOPIC,
        partition: 0,
        offset: 7,
        value: 'not json',
        key: Buffer.from([0x00, 0xff]),
        headers: [
          ['bin', Buffer.from([0xc3])],
          ['dup', 'a'],
          ['dup', 'b'],
        ],
      }),
    ]);

    await ingest(event);

    expect(await poisonRows(db.sql)).toMatchObject([
      {
        error_code: PoisonCodes.INVALID_JSON,
        raw_value: 'not json',
        raw_encoding: 'utf8',
        record_key: 'AP8=',
        record_key_encoding: 'base64',
        headers: { bin: { base64: 'ww==' }, dup: ['a', 'b'] },
      },
    ]);
  });

  it('finds a row PostgreSQL refuses that decoding did not foresee, poisons it, and stores the rest', async () => {
    // JavaScript reads 1e1000000 as Infinity; PostgreSQL's numeric overflows (SQLSTATE 22003).
    const good = Array.from({ length: 9 }, () => caseAccepted());
    const overflowing = JSON.stringify(caseAccepted('evt-overflow')).replace('"payload":{', '"payload":{"n":1e1000000,');
    const records = good.map((value, i) => mskRecord({ topic: CASE_TOPIC, partition: i % 2, offset: i, value }));
    records.push(mskRecord({ topic: CASE_TOPIC, partition: 1, offset: 50, value: overflowing }));

    const report = await ingest(mskEvent(records));

    expect(report.response).toEqual({ batchItemFailures: [] });
    expect(report).toMatchObject({ strategy: 'bisect', inserted: 9, poisoned: 1, duplicates: 0 });
    expect((await inboxRows(db.sql)).map((r) => r.event_id).sort()).toEqual(good.map((g) => g.eventId).sort());
    expect(await poisonRows(db.sql)).toMatchObject([
      { partition_no: 1, offset_no: 50, error_code: PoisonCodes.UNSTORABLE_VALUE, raw_encoding: 'utf8', raw_value: overflowing },
    ]);
    expect((await poisonRows(db.sql))[0]!.error_message).toMatch(/SQLSTATE 22003/);

    const again = await ingest(mskEvent(records));
    expect(again).toMatchObject({ inserted: 0, poisoned: 0, duplicates: 9 });
    expect(await poisonRows(db.sql)).toHaveLength(1);
  });

  it('stores a duplicate event id inside one batch once, at its lowest offset', async () => {
    const e = caseAccepted();
    const event = mskEvent([
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 5, value: e }),
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 6, value: e }),
      mskRecord({ topic: CASE_TOPIC, partition: 1, offset: 2, value: e }),
    ]);

    const report = await ingest(event);

    expect(report).toMatchObject({ inserted: 1, duplicates: 2 });
    expect((await inboxRows(db.sql)).map((r) => [r.partition_no, r.offset_no])).toEqual([[1, 2]]);
  });

  it('keeps the payload exactly, beyond what a JavaScript number holds', async () => {
    const text = JSON.stringify(caseAccepted('evt-precise')).replace('"payload":{', '"payload":{"amount":12345678901234567890.5,');

    await ingest(mskEvent([mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 1, value: text })]));

    const [row] = await db.sql<{ amount: string }[]>`
      select payload->>'amount' as amount from integration.consumer_inbox where event_id = 'evt-precise'`;
    expect(row?.amount).toBe('12345678901234567890.5');
  });
});
