/**
 * A schema-registry-backed consumer through the ingest function, on a real database: the
 * fixture events of both record formats (test/fixtures/schema-registry). A record whose
 * delivered value breaks the envelope, or that arrives in a binary source encoding, is a
 * poison row; its partition is not reported back, and every other record is stored. And a
 * Confluent registry whose secret rotates, serving schemas with references: the refused
 * lookup reads the secret again and the batch is stored, nothing handed back.
 */
import { randomUUID } from 'node:crypto';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { getConsumer } from '../../../functions/consumers';
import { binaryValues } from '../../../functions/wings/decoding/binary-values';
import { confluentFetcher, secretCredentials } from '../../../functions/wings/decoding/confluent-registry';
import { createIngest } from '../../../functions/ingest/ingest';
import { PoisonCodes } from '../../../functions/ingest/poison-codes';
import { createSchemaSource } from '../../../functions/wings/decoding/schema-source';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import { startLocalRegistry } from '../../../tools/registry-values';
import { useTestDatabase } from '../../helpers/db';
import { fixtureRecord, JSON_RECORD_FORMAT, SOURCE_RECORD_FORMAT } from '../../fixtures/schema-registry/events';
import {
  avroPaymentValue,
  protoPaymentValue,
  REFERENCED_AVRO_PAYLOAD_JSON,
  REFERENCED_PROTO_PAYLOAD_JSON,
  REFERENCED_SCHEMAS,
  REFERENCED_SUBJECTS,
} from '../../fixtures/schema-registry/references';
import { ingestFor, ingestRole, inboxRows, PAYMENT_TOPIC, poisonRows, quiet, truncateAll } from './support';

const db = await useTestDatabase();
const ingest = ingestFor(db.sql, 'notification-service');

beforeEach(() => truncateAll(db.sql));

async function jobs(): Promise<string[]> {
  const rows = await db.sql<{ source_event_id: string }[]>`select source_event_id from public.notification_jobs order by source_event_id`;
  return rows.map((r) => r.source_event_id);
}

describe('EventRecordFormat JSON (Avro and Protobuf converted by the mapping)', () => {
  it('stores and processes the valid records, poisons the one that breaks the envelope, reports nothing back', async () => {
    const report = await ingest(JSON_RECORD_FORMAT);

    expect(report.response).toEqual({ batchItemFailures: [] });
    expect(report).toMatchObject({ received: 4, inserted: 3, poisoned: 1, processed: 3 });
    expect((await inboxRows(db.sql)).map((r) => [r.partition_no, r.offset_no, r.event_id, r.status])).toEqual([
      [0, 40, '9b2f6a4e-0c1d-4e2f-8a3b-4c5d6e7f8091', 'PROCESSED'],
      [0, 42, '2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e', 'PROCESSED'],
      [1, 7, '3c4d5e6f-7a8b-4c9d-8e0f-2a3b4c5d6e7f', 'PROCESSED'],
    ]);
    expect(await jobs()).toEqual([
      '2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e',
      '3c4d5e6f-7a8b-4c9d-8e0f-2a3b4c5d6e7f',
      '9b2f6a4e-0c1d-4e2f-8a3b-4c5d6e7f8091',
    ]);
    const poison = await poisonRows(db.sql);
    expect(poison).toHaveLength(1);
    expect(poison[0]).toMatchObject({
      consumer_name: 'notification-service',
      partition_no: 0,
      offset_no: 41,
      error_code: PoisonCodes.ENVELOPE_INVALID,
      raw_encoding: 'utf8',
      raw_value: Buffer.from(fixtureRecord(JSON_RECORD_FORMAT, 0, 41).value!, 'base64').toString('utf8'),
      record_key: '"pay-4002"',
    });
    expect(poison[0]!.error_message).toMatch(/^occurred_at: .*AVRO schema 3f2a9c1e-5b7d-4e8f-9a01-23456789abcd/);
  });

  it('stores a key the mapping validated as the JSON text it delivered', async () => {
    await ingest(JSON_RECORD_FORMAT);

    const keys = await db.sql<{ offset_no: number; record_key: string; record_key_encoding: string }[]>`
      select offset_no, record_key, record_key_encoding from integration.consumer_inbox order by partition_no, offset_no`;
    expect(keys).toEqual([
      { offset_no: 40, record_key: '"pay-4001"', record_key_encoding: 'utf8' },
      { offset_no: 42, record_key: '"pay-4003"', record_key_encoding: 'utf8' },
      { offset_no: 7, record_key: 'pay-4004', record_key_encoding: 'utf8' },
    ]);
  });
});

describe('EventRecordFormat SOURCE', () => {
  it('poisons Avro and Protobuf bytes as UNSUPPORTED_SOURCE_FORMAT, stores the JSON Schema value, and a redelivery adds nothing', async () => {
    const first = await ingest(SOURCE_RECORD_FORMAT);
    const again = await ingest(SOURCE_RECORD_FORMAT);

    expect(first.response).toEqual({ batchItemFailures: [] });
    expect(first).toMatchObject({ received: 4, inserted: 1, poisoned: 3 });
    expect(again.response).toEqual({ batchItemFailures: [] });
    expect(again).toMatchObject({ inserted: 0, duplicates: 1, poisoned: 0 });
    expect((await inboxRows(db.sql)).map((r) => [r.offset_no, r.event_id, r.status])).toEqual([
      [52, '6f7a8b9c-0d1e-4f2a-9b3c-5d6e7f8091a2', 'PROCESSED'],
    ]);
    expect(await jobs()).toEqual(['6f7a8b9c-0d1e-4f2a-9b3c-5d6e7f8091a2']);
    expect((await poisonRows(db.sql)).map((p) => [p.offset_no, p.error_code, p.raw_encoding, p.raw_value])).toEqual([
      [50, PoisonCodes.UNSUPPORTED_SOURCE_FORMAT, 'base64', fixtureRecord(SOURCE_RECORD_FORMAT, 2, 50).value],
      [51, PoisonCodes.UNSUPPORTED_SOURCE_FORMAT, 'base64', fixtureRecord(SOURCE_RECORD_FORMAT, 2, 51).value],
      [53, PoisonCodes.ENVELOPE_INVALID, 'utf8', Buffer.from(fixtureRecord(SOURCE_RECORD_FORMAT, 2, 53).value!, 'base64').toString('utf8')],
    ]);
  });
});

describe('a Confluent registry whose secret rotates', () => {
  const SECRET_ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:confluent/payments-AbC123';
  const OLD = { username: 'inbox-reader', password: 'before-rotation' };
  const NEW = { username: 'inbox-reader', password: 'after-rotation' };
  const secrets = mockClient(SecretsManagerClient);
  afterEach(() => secrets.reset());

  it('401 once, the secret read again, the batch stored and processed: nothing handed back, schema references resolved', async () => {
    let accepted = OLD;
    const registry = await startLocalRegistry(REFERENCED_SCHEMAS, { subjects: REFERENCED_SUBJECTS, credentials: () => accepted });
    let stored = OLD;
    secrets.on(GetSecretValueCommand).callsFake(() => ({ SecretString: JSON.stringify(stored) }));
    const consumer = getConsumer('notification-service');
    const ingest = createIngest({
      sql: db.as(ingestRole(consumer)),
      consumer,
      config: { maxPayloadBytes: 256 * 1024 },
      ...quiet(),
      valueDecoder: binaryValues(
        consumer,
        createSchemaSource(
          confluentFetcher({
            url: registry.url,
            credentials: secretCredentials(new SecretsManagerClient({ region: 'eu-west-1' }), SECRET_ARN, { maxAgeMs: 300_000 }),
            timeoutMs: 2_000,
          }),
        ),
      ),
    });
    const avroId = randomUUID();
    const protoId = randomUUID();
    try {
      // Before the rotation: the Avro schema (and its references) read with the first credentials.
      const before = await ingest(
        mskEvent([mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 1, value: avroPaymentValue(avroId) })]),
        {
          awsRequestId: 'req-rotation-1',
        },
      );
      // The secret rotates: the registry takes the new password only; this container still holds the old one.
      stored = NEW;
      accepted = NEW;
      const from = registry.log().length;

      const after = await ingest(
        mskEvent([mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 2, value: protoPaymentValue(protoId) })]),
        { awsRequestId: 'req-rotation-2' },
      );

      expect(before).toMatchObject({ inserted: 1, poisoned: 0, registryUnavailable: 0, response: { batchItemFailures: [] } });
      expect(after).toMatchObject({ inserted: 1, poisoned: 0, registryUnavailable: 0, processed: 1, response: { batchItemFailures: [] } });
      expect(registry.log().slice(from)).toEqual([
        { path: '/schemas/ids/213', status: 401 },
        { path: '/schemas/ids/213', status: 200 },
        { path: '/subjects/payments-money-proto/versions/1', status: 200 },
        { path: '/subjects/payments-currency-proto/versions/1', status: 200 },
      ]);
      expect(secrets.commandCalls(GetSecretValueCommand).map((c) => c.args[0].input)).toEqual([
        { SecretId: SECRET_ARN },
        { SecretId: SECRET_ARN },
      ]);
      const rows = await db.sql<{ offset_no: number; event_id: string; status: string; payload: string }[]>`
        select offset_no, event_id, status, payload::text as payload
        from integration.consumer_inbox where consumer_name = 'notification-service' order by offset_no`;
      expect(rows.map((r) => [r.offset_no, r.event_id, r.status])).toEqual([
        [1, avroId, 'PROCESSED'],
        [2, protoId, 'PROCESSED'],
      ]);
      // Exact decimals and 64-bit integers from the referenced types, as PostgreSQL parsed the decoded text.
      expect(rows.map((r) => JSON.parse(r.payload) as unknown)).toEqual([
        JSON.parse(REFERENCED_AVRO_PAYLOAD_JSON),
        JSON.parse(REFERENCED_PROTO_PAYLOAD_JSON),
      ]);
      expect(rows.map((r) => r.payload)).toEqual([
        expect.stringContaining('9007199254740993'),
        expect.stringContaining('9007199254740993'),
      ]);
      expect(await jobs()).toEqual([avroId, protoId].sort());
    } finally {
      await registry.close();
    }
  });
});
