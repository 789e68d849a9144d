/**
 * Registry-framed values through the whole ingest path against a real PostgreSQL: what is
 * stored (exact integers in the payload column), what is poisoned with which code, and a
 * registry outage handed back as batch item failures with nothing lost.
 */
import { createHash, randomUUID } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { getConsumer } from '../../../functions/consumers';
import { PoisonCodes } from '../../../functions/ingest/poison-codes';
import type { IngestReport } from '../../../functions/ingest/batch-report';
import { createIngest } from '../../../functions/ingest/ingest';
import { binaryValues } from '../../../functions/wings/decoding/binary-values';
import { confluentFetcher } from '../../../functions/wings/decoding/confluent-registry';
import { createSchemaSource } from '../../../functions/wings/decoding/schema-source';
import type { KafkaEvent } from '../../../functions/ingest/types';
import { useTestDatabase } from '../../helpers/db';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import {
  avroEncoder,
  CASE_AVRO_SCHEMA,
  CASE_PROTO,
  caseEventToAvro,
  caseEventToProto,
  confluentFrame,
  confluentMessageIndexes,
  protobufEncoder,
  startLocalRegistry,
} from '../../../tools/registry-values';
import { CASE_TOPIC, caseAccepted, inboxRows, ingestRole, poisonRows, quiet, truncateAll } from './support';

const db = await useTestDatabase();
const consumer = getConsumer('case-projection');
const AVRO_ID = 11;
const PROTO_ID = 12;
const encodeAvro = avroEncoder(CASE_AVRO_SCHEMA);
const encodeProto = protobufEncoder(CASE_PROTO, 'regulatory.case.v1.CaseEvent');

let registry: Awaited<ReturnType<typeof startLocalRegistry>>;
beforeAll(async () => {
  registry = await startLocalRegistry([
    { id: AVRO_ID, schema: JSON.stringify(CASE_AVRO_SCHEMA) },
    { id: PROTO_ID, schemaType: 'PROTOBUF', schema: CASE_PROTO },
  ]);
});
afterAll(() => registry.close());
beforeEach(() => truncateAll(db.sql));
afterEach(() => registry.up());

let requests = 0;
function ingestWithRegistry(logger = quiet().logger, maxPayloadBytes = 256 * 1024): (event: KafkaEvent) => Promise<IngestReport> {
  const ingest = createIngest({
    sql: db.as(ingestRole(consumer)),
    consumer,
    config: { maxPayloadBytes },
    logger,
    metrics: quiet().metrics,
    valueDecoder: binaryValues(consumer, createSchemaSource(confluentFetcher({ url: registry.url, timeoutMs: 2_000 }))),
  });
  return (event) => ingest(event, { awsRequestId: `req-bin-${++requests}` });
}

const avroValue = (e: Record<string, unknown>) => confluentFrame(AVRO_ID, encodeAvro(caseEventToAvro(e)));
const protoValue = (e: Record<string, unknown>) =>
  confluentFrame(PROTO_ID, Buffer.concat([confluentMessageIndexes([1]), encodeProto(caseEventToProto(e))]));

describe('registry-framed values', () => {
  it('stores Avro, Protobuf and JSON records of one batch side by side, typed into the envelope', async () => {
    const ingest = ingestWithRegistry();
    const a = caseAccepted(undefined, { aggregateVersion: 3 });
    const p = caseAccepted();
    const j = caseAccepted();

    const report = await ingest(
      mskEvent([
        mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 1, value: avroValue(a) }),
        mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 2, value: protoValue(p) }),
        mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 3, value: j }),
      ]),
    );

    expect(report).toMatchObject({ inserted: 3, poisoned: 0, registryUnavailable: 0, response: { batchItemFailures: [] } });
    const rows = await db.sql<
      Array<{ event_id: string; occurred_at: Date; aggregate_version: string | null; payload: Record<string, unknown> }>
    >`
      select event_id, occurred_at, aggregate_version::text as aggregate_version, payload from integration.consumer_inbox order by offset_no`;
    expect(rows.map((r) => r.event_id)).toEqual([a.eventId, p.eventId, j.eventId]);
    expect(rows[0]).toMatchObject({
      aggregate_version: '3',
      payload: { caseId: a.payload.caseId, acceptedAt: '2026-07-03T09:15:30.000Z', newStatus: null },
    });
    expect(rows[0]!.occurred_at.toISOString()).toBe('2026-07-03T09:15:30.000Z');
    expect(rows[1]).toMatchObject({ payload: { caseId: p.payload.caseId, acceptedAt: '2026-07-03T09:15:30.000000000Z' } });
  });

  it('keeps a payload integer beyond 2^53 exact in jsonb', async () => {
    const schema = {
      ...CASE_AVRO_SCHEMA,
      fields: CASE_AVRO_SCHEMA.fields.map((f) =>
        f.name === 'payload'
          ? {
              name: 'payload',
              type: {
                type: 'record',
                name: 'P',
                fields: [
                  { name: 'caseId', type: 'string' },
                  { name: 'ledgerSeq', type: 'long' },
                ],
              },
            }
          : f,
      ),
    };
    const wide = await startLocalRegistry([{ id: 77, schema: JSON.stringify(schema) }]);
    try {
      const exact = createIngest({
        sql: db.as(ingestRole(consumer)),
        consumer,
        config: { maxPayloadBytes: 256 * 1024 },
        ...quiet(),
        valueDecoder: binaryValues(consumer, createSchemaSource(confluentFetcher({ url: wide.url, timeoutMs: 2_000 }))),
      });
      const e = caseAccepted();
      const value = confluentFrame(
        77,
        avroEncoder(schema)({ ...caseEventToAvro(e), payload: { caseId: 'c-1', ledgerSeq: 9_007_199_254_740_993n } }),
      );

      await exact(mskEvent([mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 1, value })]), { awsRequestId: 'req-wide' });

      const [row] = await db.sql<
        Array<{ seq: string }>
      >`select payload->>'ledgerSeq' as seq from integration.consumer_inbox where event_id = ${e.eventId}`;
      expect(row?.seq).toBe('9007199254740993');
    } finally {
      await wide.close();
    }
  });

  it('poisons an unknown schema id SCHEMA_NOT_FOUND, undecodable bytes SCHEMA_MISMATCH, an unknown header UNSUPPORTED_FRAMING; a redelivery adds nothing', async () => {
    const ingest = ingestWithRegistry();
    const good = caseAccepted();
    const event = mskEvent([
      mskRecord({ topic: CASE_TOPIC, partition: 1, offset: 10, value: confluentFrame(404, encodeAvro(caseEventToAvro(caseAccepted()))) }),
      mskRecord({ topic: CASE_TOPIC, partition: 1, offset: 11, value: confluentFrame(AVRO_ID, Buffer.from([0x02])) }),
      mskRecord({ topic: CASE_TOPIC, partition: 1, offset: 12, value: Buffer.from([0x05, 0x01, 0x02]) }),
      mskRecord({ topic: CASE_TOPIC, partition: 1, offset: 13, value: avroValue(good) }),
    ]);

    const first = await ingest(event);
    const again = await ingest(event);

    expect(first).toMatchObject({ inserted: 1, poisoned: 3, response: { batchItemFailures: [] } });
    expect(again).toMatchObject({ inserted: 0, poisoned: 0, duplicates: 1 });
    expect((await poisonRows(db.sql)).map((r) => [r.offset_no, r.error_code, r.raw_encoding])).toEqual([
      [10, PoisonCodes.SCHEMA_NOT_FOUND, 'base64'],
      [11, PoisonCodes.SCHEMA_MISMATCH, 'base64'],
      [12, PoisonCodes.UNSUPPORTED_FRAMING, 'base64'],
    ]);
    expect((await inboxRows(db.sql)).map((r) => r.event_id)).toEqual([good.eventId]);
  });

  it('hands a partition back from the record whose registry is down; the rest is stored, nothing is poisoned, the redelivery completes it', async () => {
    const ingest = ingestWithRegistry();
    const [before, framed, after, other] = [caseAccepted(), caseAccepted(), caseAccepted(), caseAccepted()];
    const partition0 = [
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 20, value: before }),
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 21, value: protoValue(framed) }),
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 22, value: after }),
    ];
    registry.down();

    const first = await ingest(mskEvent([...partition0, mskRecord({ topic: CASE_TOPIC, partition: 1, offset: 5, value: other })]));

    expect(first.response).toEqual({ batchItemFailures: [{ itemIdentifier: { partition: `${CASE_TOPIC}-0`, offset: 21 } }] });
    expect(first).toMatchObject({ inserted: 2, poisoned: 0, registryUnavailable: 2 });
    expect((await inboxRows(db.sql)).map((r) => r.event_id).sort()).toEqual([before.eventId, other.eventId].sort());
    expect(await poisonRows(db.sql)).toEqual([]);

    registry.up();
    const redelivery = await ingest(mskEvent(partition0.slice(1)));

    expect(redelivery).toMatchObject({ inserted: 2, registryUnavailable: 0, response: { batchItemFailures: [] } });
    expect((await inboxRows(db.sql)).map((r) => r.offset_no)).toEqual([20, 21, 22, 5]);
  });
});

describe('bad input', () => {
  it('an oversized value keeps a bounded prefix, its size and SHA-256 (10 MiB)', async () => {
    const ingest = ingestWithRegistry();
    const head = JSON.stringify(caseAccepted()).slice(0, -1);
    const value = Buffer.from(`${head},"blob":"${'x'.repeat(10 * 1024 * 1024 - head.length - 12)}"}`);
    const sha256 = createHash('sha256').update(value).digest('hex');

    const report = await ingest(mskEvent([mskRecord({ topic: CASE_TOPIC, partition: 2, offset: 1, value })]));

    expect(report).toMatchObject({ poisoned: 1, response: { batchItemFailures: [] } });
    const [row] = await poisonRows(db.sql);
    expect(row).toMatchObject({ error_code: PoisonCodes.PAYLOAD_TOO_LARGE, raw_encoding: 'utf8' });
    expect(row!.raw_value).toBe(value.subarray(0, 4096).toString('utf8'));
    expect(row!.error_message).toBe(
      `value is ${value.length} bytes, over the limit of ${256 * 1024}; raw_value keeps its first 4096 bytes only, sha256 of the whole value ${sha256}`,
    );
  });

  it.each([
    ['brackets only', '['.repeat(100_000) + ']'.repeat(100_000)],
    ['a NUL inside', `{"a":${'['.repeat(100_000)}"\\u0000"${']'.repeat(100_000)}}`],
    ['not even JSON', `${'{"a":'.repeat(100_000)}nope`],
  ])('a 100,000-deep value (%s) is poison JSON_TOO_DEEP', async (_label, text) => {
    const ingest = ingestWithRegistry(undefined, 4 * 1024 * 1024);

    const report = await ingest(mskEvent([mskRecord({ topic: CASE_TOPIC, partition: 2, offset: 2, value: text })]));

    expect(report).toMatchObject({ poisoned: 1, inserted: 0, response: { batchItemFailures: [] } });
    const [row] = await poisonRows(db.sql);
    expect(row).toMatchObject({ error_code: PoisonCodes.JSON_TOO_DEEP, error_message: 'value nests deeper than 64 levels' });
  });

  it("no log line of a batch of bad and good values carries a value's text", async () => {
    const secret = `s3cret-${randomUUID()}`;
    const lines: string[] = [];
    const capture = (chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    };
    const spies = [
      vi.spyOn(process.stdout, 'write').mockImplementation(capture),
      vi.spyOn(process.stderr, 'write').mockImplementation(capture),
    ];
    const logger = new Logger({ serviceName: 'ingest-log-test', logLevel: 'DEBUG' });
    try {
      const ingest = ingestWithRegistry(logger, 4096);
      await ingest(
        mskEvent([
          mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 1, value: caseAccepted(undefined, { payload: { caseId: secret } }) }),
          mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 2, value: `{"eventId": "${secret}", ` }),
          mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 3, value: caseAccepted(undefined, { eventVersion: secret }) }),
          mskRecord({
            topic: CASE_TOPIC,
            partition: 0,
            offset: 4,
            value: caseAccepted(undefined, { payload: { caseId: `${secret}\u0000` } }),
          }),
          mskRecord({
            topic: CASE_TOPIC,
            partition: 0,
            offset: 5,
            value: caseAccepted(undefined, { payload: { blob: secret.repeat(200) } }),
          }),
          mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 6, value: confluentFrame(AVRO_ID, Buffer.from(secret)) }),
          mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 7, value: `${'['.repeat(100)}"${secret}"` }),
          // Passes the envelope schema, but PostgreSQL refuses the date (22008) and its message quotes it.
          mskRecord({
            topic: CASE_TOPIC,
            partition: 0,
            offset: 8,
            value: caseAccepted(undefined, { occurredAt: '0000-01-01T01:02:03.456789Z' }),
          }),
        ]),
      );
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
    const output = lines.join('');
    expect(output).toContain('ingest batch');
    expect(output).toMatch(/"message":"ingest store failed, stepping down".*"sqlState":"22008"/);
    expect(output).not.toContain(secret);
    expect(output).not.toContain('0000-01-01');
  });
});
