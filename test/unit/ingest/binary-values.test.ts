/**
 * Avro, Protobuf and JSON Schema values in the registries' wire formats, decoded in the
 * function and typed into the envelope (docs/ingest.md, "Binary values"). The records take
 * the shapes of the public Kafka test events (Powertools for AWS Lambda: Confluent Protobuf
 * with message indexes `02 02`, Glue Protobuf with a leading `01`, SOURCE values named by
 * `valueSchemaMetadata`); schemas and values are this project's own.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getConsumer } from '../../../functions/consumers';
import type { ConsumerDeclaration } from '../../../functions/framework/types';
import { decodeRecord, type Decoded } from '../../../functions/ingest/decode';
import { PoisonCodes } from '../../../functions/ingest/poison-codes';
import { binaryValues } from '../../../functions/wings/decoding/binary-values';
import { resolveValueSchemas } from '../../../functions/wings/decoding/value-route';
import { confluentFetcher } from '../../../functions/wings/decoding/confluent-registry';
import {
  createSchemaSource,
  RegistryUnavailableError,
  SchemaNotFoundError,
  type SchemaFetcher,
  type SchemaSource,
} from '../../../functions/wings/decoding/schema-source';
import type { KafkaRecord } from '../../../functions/ingest/types';
import { compileSchema, type SchemaDefinition } from '../../../functions/wings/decoding/writer-schema';
import { mskRecord } from '../../../tools/msk-events';
import {
  avroPaymentValue,
  ORG as REFERENCE_ORG,
  protoPaymentValue,
  REFERENCED_AVRO_PAYLOAD_JSON,
  REFERENCED_PROTO_PAYLOAD_JSON,
  REFERENCE_IDS,
  REFERENCED_SCHEMAS,
  REFERENCED_SUBJECTS,
} from '../../fixtures/schema-registry/references';
import {
  avroEncoder,
  confluentFrame,
  confluentMessageIndexes,
  decimalBytes,
  glueFrame,
  glueMessageIndex,
  protobufEncoder,
  startLocalRegistry,
} from '../../../tools/registry-values';

const payments = getConsumer('notification-service');
const limits = { maxPayloadBytes: 256 * 1024 };
const ORG = '7d1f2c4e-8a9b-4c3d-9e8f-1a2b3c4d5e6f';
const BEYOND_2_53 = 9_007_199_254_740_993n; // 2^53 + 1: a double would round it
const U64 = 18_446_744_073_709_551_557n; // near 2^64

// ---- Writer schemas ---------------------------------------------------------------------

const PAYMENT_AVRO = {
  type: 'record',
  name: 'PaymentCompleted',
  namespace: 'payments.v1',
  fields: [
    { name: 'event_id', type: { type: 'string', logicalType: 'uuid' } },
    { name: 'event_type', type: 'string' },
    { name: 'event_version', type: 'int' },
    { name: 'org_id', type: ['null', { type: 'string', logicalType: 'uuid' }] },
    { name: 'aggregate_id', type: 'string' },
    { name: 'occurred_at', type: { type: 'long', logicalType: 'timestamp-millis' } },
    {
      name: 'payload',
      type: {
        type: 'record',
        name: 'Payment',
        fields: [
          { name: 'amount', type: { type: 'bytes', logicalType: 'decimal', precision: 12, scale: 2 } },
          { name: 'currency', type: { type: 'enum', name: 'Currency', symbols: ['EUR', 'USD'] } },
          { name: 'ledger_seq', type: 'long' },
          { name: 'settled_at', type: { type: 'long', logicalType: 'timestamp-micros' } },
          { name: 'note', type: ['null', 'string'], default: null },
          { name: 'tags', type: { type: 'array', items: 'string' } },
          {
            name: 'lines',
            type: {
              type: 'array',
              items: {
                type: 'record',
                name: 'Line',
                fields: [
                  { name: 'sku', type: 'string' },
                  { name: 'qty', type: 'int' },
                ],
              },
            },
          },
          { name: 'attributes', type: { type: 'map', values: 'string' } },
          { name: 'booked_on', type: { type: 'int', logicalType: 'date' } },
          { name: 'reference', type: ['int', 'long'] },
          { name: 'checksum', type: { type: 'fixed', name: 'Checksum', size: 4 } },
        ],
      },
    },
  ],
};

function paymentAvroValue(eventId: string) {
  return {
    event_id: eventId,
    event_type: 'payment.completed',
    event_version: 1,
    org_id: ORG,
    aggregate_id: 'pay-9001',
    occurred_at: 1_783_070_130_250n, // 2026-07-03T09:15:30.250Z
    payload: {
      amount: decimalBytes(-123_456n), // -1234.56
      currency: 'EUR',
      ledger_seq: BEYOND_2_53,
      settled_at: 1_783_070_130_250_123n,
      note: 'first',
      tags: ['card', 'instant'],
      lines: [
        { sku: 'A-1', qty: 2 },
        { sku: 'B-2', qty: 1 },
      ],
      attributes: { channel: 'web' },
      booked_on: 20_637, // 2026-07-03
      reference: 7,
      checksum: Buffer.from([0xde, 0xad, 0xbe, 0xef]),
    },
  };
}

/** The envelope is the file's second top-level message; a nested copy sits at [2, 0]. */
const PAYMENT_PROTO = `syntax = "proto3";
package payments.v1;
import "google/protobuf/timestamp.proto";

message Audit { string actor = 1; }

message PaymentCompleted {
  string event_id = 1;
  string event_type = 2;
  int32 event_version = 3;
  string org_id = 4;
  string aggregate_id = 5;
  google.protobuf.Timestamp occurred_at = 6;
  Payment payload = 7;
}

message Versioned {
  message PaymentCompleted {
    string event_id = 1;
    string event_type = 2;
    int32 event_version = 3;
    string org_id = 4;
    string aggregate_id = 5;
    google.protobuf.Timestamp occurred_at = 6;
    Payment payload = 7;
  }
}

message Payment {
  int64 amount_minor = 1;
  Currency currency = 2;
  repeated Line lines = 3;
  uint64 ledger_seq = 4;
  bytes checksum = 5;
  map<string, string> attributes = 6;
  google.protobuf.Timestamp settled_at = 7;
  enum Currency { CURRENCY_UNSPECIFIED = 0; EUR = 1; USD = 2; }
}

message Line { string sku = 1; int32 qty = 2; }
`;

function paymentProtoValue(eventId: string) {
  return {
    event_id: eventId,
    event_type: 'payment.completed',
    event_version: 1,
    org_id: ORG,
    aggregate_id: 'pay-9002',
    occurred_at: { seconds: 1_783_070_130, nanos: 250_000_001 },
    payload: {
      amount_minor: '9007199254740993',
      currency: 'USD',
      lines: [{ sku: 'A-1', qty: 2 }, { sku: 'B-2' }],
      ledger_seq: U64.toString(),
      checksum: Buffer.from([1, 2, 3]),
      attributes: { channel: 'app' },
      settled_at: { seconds: 0, nanos: 0 },
    },
  };
}

const avroPayment = avroEncoder(PAYMENT_AVRO);
const protoPayment = protobufEncoder(PAYMENT_PROTO, 'payments.v1.PaymentCompleted');
const protoNested = protobufEncoder(PAYMENT_PROTO, 'payments.v1.Versioned.PaymentCompleted');

const SCHEMA_ID = { avro: 101, proto: 102, json: 103 };
const GLUE_AVRO = 'b7a3c8e2-5f14-4d6a-9c0b-1e2f3a4b5c6d';
const GLUE_PROTO = 'c8b4d9f3-6a25-4e7b-8d1c-2f3a4b5c6d7e';

const definitions = new Map<string, SchemaDefinition>([
  [`confluent:${SCHEMA_ID.avro}`, { format: 'AVRO', definition: JSON.stringify(PAYMENT_AVRO) }],
  [`confluent:${SCHEMA_ID.proto}`, { format: 'PROTOBUF', definition: PAYMENT_PROTO }],
  [`confluent:${SCHEMA_ID.json}`, { format: 'JSON', definition: '{"type":"object"}' }],
  [`glue:${GLUE_AVRO}`, { format: 'AVRO', definition: JSON.stringify(PAYMENT_AVRO) }],
  [`glue:${GLUE_PROTO}`, { format: 'PROTOBUF', definition: PAYMENT_PROTO }],
]);

/** A registry in memory: what it holds, or SchemaNotFoundError; `fail` makes it unavailable. */
function memoryRegistry(options: { fail?: boolean } = {}): { fetcher: SchemaFetcher; lookups: string[] } {
  const lookups: string[] = [];
  const fetcher: SchemaFetcher = async (ref) => {
    const key = ref.registry === 'confluent' ? `confluent:${ref.id}` : `glue:${ref.versionId}`;
    lookups.push(key);
    if (options.fail) throw new RegistryUnavailableError('the Confluent registry answered HTTP 503');
    const found = definitions.get(key);
    if (found === undefined) throw new SchemaNotFoundError(`the registry has no schema ${key}`);
    return found;
  };
  return { fetcher, lookups };
}

let offsets = 0;
function record(value: Uint8Array, meta?: { dataFormat: string; schemaId: string }): KafkaRecord {
  return {
    ...mskRecord({ topic: 'payment.completed', partition: 0, offset: ++offsets, value, key: 'pay' }),
    ...(meta ? { valueSchemaMetadata: meta } : {}),
  };
}

async function decodeWith(r: KafkaRecord, source: SchemaSource | undefined, consumer: ConsumerDeclaration = payments): Promise<Decoded> {
  return decodeRecord(r, consumer, limits, await binaryValues(consumer, source).forBatch([r]));
}

function validRow(d: Decoded) {
  if (d.kind !== 'valid')
    throw new Error(`expected a valid record, got ${d.kind === 'poison' ? `${d.row.errorCode}: ${d.row.errorMessage}` : d.reason}`);
  return d.row;
}

function poisonRow(d: Decoded) {
  if (d.kind !== 'poison') throw new Error(`expected poison, got ${d.kind}`);
  return d.row;
}

const AVRO_PAYLOAD_JSON =
  '"payload":{"amount":"-1234.56","currency":"EUR","ledger_seq":9007199254740993,"settled_at":"2026-07-03T09:15:30.250123Z","note":"first","tags":["card","instant"],"lines":[{"sku":"A-1","qty":2},{"sku":"B-2","qty":1}],"attributes":{"channel":"web"},"booked_on":"2026-07-03","reference":7,"checksum":"3q2+7w=="}';

describe('Avro', () => {
  it('decodes a Confluent-framed value with its writer schema from the registry, typed into the envelope', async () => {
    const eventId = randomUUID();
    const d = await decodeWith(
      record(confluentFrame(SCHEMA_ID.avro, avroPayment(paymentAvroValue(eventId)))),
      createSchemaSource(memoryRegistry().fetcher),
    );

    const row = validRow(d);
    expect(row).toMatchObject({ eventId, occurredAt: '2026-07-03T09:15:30.250Z', tenantId: ORG, aggregateId: 'pay-9001', eventVersion: 1 });
    // Logical types as text, the long beyond 2^53 with all its digits, unions unwrapped, bytes as base64.
    expect(row.envelopeJson).toBe(
      `{"event_id":"${eventId}","event_type":"payment.completed","event_version":1,"org_id":"${ORG}","aggregate_id":"pay-9001","occurred_at":"2026-07-03T09:15:30.250Z",${AVRO_PAYLOAD_JSON}}`,
    );
  });

  it('decodes a Glue-framed value, uncompressed and zlib-compressed alike', async () => {
    const source = createSchemaSource(memoryRegistry().fetcher);
    for (const zlib of [false, true]) {
      const eventId = randomUUID();
      const row = validRow(await decodeWith(record(glueFrame(GLUE_AVRO, avroPayment(paymentAvroValue(eventId)), { zlib })), source));
      expect(row.eventId).toBe(eventId);
      expect(row.envelopeJson).toContain(AVRO_PAYLOAD_JSON);
    }
  });

  it('decodes a SOURCE-format value (framing removed by the mapping) by the schema id in valueSchemaMetadata', async () => {
    const eventId = randomUUID();
    const body = avroPayment(paymentAvroValue(eventId));

    const confluent = validRow(
      await decodeWith(
        record(body, { dataFormat: 'AVRO', schemaId: String(SCHEMA_ID.avro) }),
        createSchemaSource(memoryRegistry().fetcher),
      ),
    );
    const glue = validRow(
      await decodeWith(
        record(body, { dataFormat: 'AVRO', schemaId: GLUE_AVRO.toUpperCase() }),
        createSchemaSource(memoryRegistry().fetcher),
      ),
    );

    expect(confluent.envelopeJson).toBe(glue.envelopeJson);
    expect(confluent.eventId).toBe(eventId);
  });

  it('keeps an ambiguous union in Avro JSON encoding\'s wrapper, {"<branch>": value}', async () => {
    const schema = {
      type: 'record',
      name: 'W',
      fields: [
        {
          name: 'choice',
          type: [
            { type: 'record', name: 'A', fields: [{ name: 'x', type: 'int' }] },
            { type: 'record', name: 'B', fields: [{ name: 'y', type: 'string' }] },
          ],
        },
      ],
    };
    const compiled = await compileSchema({ format: 'AVRO', definition: JSON.stringify(schema) });
    const body = Buffer.from([0x02, 0x02, 0x61]); // branch 1 (B), y = "a"

    expect(compiled.decode(body, 'none', 64)).toEqual({ json: '{"choice":{"B":{"y":"a"}}}' });
  });

  it('is SCHEMA_MISMATCH when the bytes do not decode with the writer schema, naming the schema, not the bytes', async () => {
    const truncated = avroPayment(paymentAvroValue(randomUUID())).subarray(0, 20);
    const row = poisonRow(
      await decodeWith(record(confluentFrame(SCHEMA_ID.avro, truncated)), createSchemaSource(memoryRegistry().fetcher)),
    );

    expect(row).toMatchObject({
      errorCode: PoisonCodes.SCHEMA_MISMATCH,
      errorMessage: `value does not decode as AVRO with schema id ${SCHEMA_ID.avro}`,
      rawEncoding: 'base64',
    });
  });

  it('is SCHEMA_MISMATCH when bytes are left over after the record', async () => {
    const body = Buffer.concat([avroPayment(paymentAvroValue(randomUUID())), Buffer.from([0x02])]);
    expect(
      poisonRow(await decodeWith(record(confluentFrame(SCHEMA_ID.avro, body)), createSchemaSource(memoryRegistry().fetcher))).errorCode,
    ).toBe(PoisonCodes.SCHEMA_MISMATCH);
  });
});

describe('Protobuf', () => {
  // protobufjs lists repeated and map fields first; jsonb keeps no member order anyway.
  const expectedPayload =
    '"payload":{"lines":[{"sku":"A-1","qty":2},{"sku":"B-2","qty":0}],"attributes":{"channel":"app"},"amount_minor":9007199254740993,"currency":"USD","ledger_seq":18446744073709551557,"checksum":"AQID","settled_at":"1970-01-01T00:00:00.000000000Z"}';

  it.each([
    ['02 02: the second message', [1], protoPayment],
    ['04 04 00: a message nested in the third', [2, 0], protoNested],
  ])('decodes a Confluent-framed value whose message indexes are %s', async (_label, path, encode) => {
    const eventId = randomUUID();
    const body = Buffer.concat([confluentMessageIndexes(path), encode(paymentProtoValue(eventId))]);

    const row = validRow(await decodeWith(record(confluentFrame(SCHEMA_ID.proto, body)), createSchemaSource(memoryRegistry().fetcher)));

    // Field names as declared, Timestamp as ISO text (nanoseconds kept), enums by name, 64-bit integers exact, bytes base64.
    expect(row.envelopeJson).toBe(
      `{"event_id":"${eventId}","event_type":"payment.completed","event_version":1,"org_id":"${ORG}","aggregate_id":"pay-9002","occurred_at":"2026-07-03T09:15:30.250000001Z",${expectedPayload}}`,
    );
    expect(row.occurredAt).toBe('2026-07-03T09:15:30.250000001Z');
  });

  it('reads the single byte 00 as the first message', async () => {
    const first = PAYMENT_PROTO.replace('message Audit { string actor = 1; }\n', '');
    const compiled = await compileSchema({ format: 'PROTOBUF', definition: first });
    const body = Buffer.concat([confluentMessageIndexes([0]), protoPayment(paymentProtoValue('e-1'))]);

    expect(body[0]).toBe(0x00);
    expect(
      'json' in compiled.decode(body, 'confluent', 64) &&
        JSON.parse((compiled.decode(body, 'confluent', 64) as { json: string }).json).event_id,
    ).toBe('e-1');
  });

  it('decodes a Glue-framed value with its leading message index 01, uncompressed and zlib-compressed', async () => {
    const source = createSchemaSource(memoryRegistry().fetcher);
    for (const zlib of [false, true]) {
      const eventId = randomUUID();
      const body = Buffer.concat([glueMessageIndex(1), protoPayment(paymentProtoValue(eventId))]);
      const row = validRow(await decodeWith(record(glueFrame(GLUE_PROTO, body, { zlib })), source));
      expect(row.eventId).toBe(eventId);
      expect(row.envelopeJson).toContain(expectedPayload);
    }
  });

  it('decodes SOURCE-format values, which keep their message index: Confluent 02 02, Glue 01', async () => {
    const eventId = randomUUID();
    const message = protoPayment(paymentProtoValue(eventId));
    const source = createSchemaSource(memoryRegistry().fetcher);

    const confluent = validRow(
      await decodeWith(
        record(Buffer.concat([Buffer.from([2, 2]), message]), { dataFormat: 'PROTOBUF', schemaId: String(SCHEMA_ID.proto) }),
        source,
      ),
    );
    const glue = validRow(
      await decodeWith(record(Buffer.concat([Buffer.from([1]), message]), { dataFormat: 'PROTOBUF', schemaId: GLUE_PROTO }), source),
    );

    expect(confluent.envelopeJson).toBe(glue.envelopeJson);
    expect(confluent.eventId).toBe(eventId);
  });

  it('is SCHEMA_MISMATCH for a message index the schema does not have', async () => {
    const body = Buffer.concat([confluentMessageIndexes([7]), protoPayment(paymentProtoValue(randomUUID()))]);
    expect(
      poisonRow(await decodeWith(record(confluentFrame(SCHEMA_ID.proto, body)), createSchemaSource(memoryRegistry().fetcher))).errorCode,
    ).toBe(PoisonCodes.SCHEMA_MISMATCH);
  });

  it('is SCHEMA_MISMATCH for bytes that are not a message of the schema (a wire type that cannot be)', async () => {
    const body = Buffer.concat([confluentMessageIndexes([1]), Buffer.from([0x0f, 0xff, 0xff])]);
    expect(
      poisonRow(await decodeWith(record(confluentFrame(SCHEMA_ID.proto, body)), createSchemaSource(memoryRegistry().fetcher))).errorCode,
    ).toBe(PoisonCodes.SCHEMA_MISMATCH);
  });
});

describe('JSON Schema', () => {
  it("strips the Confluent framing and decodes the producer's JSON text", async () => {
    const eventId = randomUUID();
    const json = JSON.stringify({
      event_id: eventId,
      event_type: 'payment.completed',
      event_version: 1,
      org_id: ORG,
      aggregate_id: 'p',
      occurred_at: '2026-07-03T09:15:30Z',
      payload: { amount: 1 },
    });

    const row = validRow(
      await decodeWith(record(confluentFrame(SCHEMA_ID.json, Buffer.from(json))), createSchemaSource(memoryRegistry().fetcher)),
    );

    expect(row.envelopeJson).toBe(json);
  });
});

describe('outcomes', () => {
  const framedAvro = () => confluentFrame(SCHEMA_ID.avro, avroPayment(paymentAvroValue(randomUUID())));

  it("an id the registry does not have is SCHEMA_NOT_FOUND poison, the value kept as the event's base64", async () => {
    const r = record(confluentFrame(999, avroPayment(paymentAvroValue(randomUUID()))));
    const row = poisonRow(await decodeWith(r, createSchemaSource(memoryRegistry().fetcher)));

    expect(row).toMatchObject({ errorCode: PoisonCodes.SCHEMA_NOT_FOUND, rawValue: r.value, rawEncoding: 'base64' });
    expect(row.errorMessage).toBe('the registry has no schema confluent:999 (confluent)');
  });

  it('a Glue version id the registry does not have is SCHEMA_NOT_FOUND too', async () => {
    const row = poisonRow(
      await decodeWith(record(glueFrame(randomUUID(), Buffer.from([0]))), createSchemaSource(memoryRegistry().fetcher)),
    );
    expect(row.errorCode).toBe(PoisonCodes.SCHEMA_NOT_FOUND);
  });

  it('a framed value of a consumer without a registry is SCHEMA_NOT_FOUND, saying none is declared', async () => {
    const row = poisonRow(await decodeWith(record(framedAvro()), undefined));
    expect(row).toMatchObject({
      errorCode: PoisonCodes.SCHEMA_NOT_FOUND,
      errorMessage: `value names schema id ${SCHEMA_ID.avro}, but the consumer declares no schema registry to read it from`,
    });
  });

  it('an unreachable registry makes the record unavailable (handed back), never poison', async () => {
    const d = await decodeWith(record(framedAvro()), createSchemaSource(memoryRegistry({ fail: true }).fetcher));
    expect(d).toEqual({ kind: 'unavailable', reason: 'the Confluent registry answered HTTP 503' });
  });

  it.each([
    ['a leading byte that is no header', Buffer.from([0x07, 1, 2, 3])],
    ['a Confluent header cut short', Buffer.from([0x00, 0, 0])],
    ['a Glue header with an unknown compression', Buffer.concat([Buffer.from([3, 9]), Buffer.alloc(20)])],
  ])('%s is UNSUPPORTED_FRAMING', async (_label, bytes) => {
    const row = poisonRow(await decodeWith(record(bytes), createSchemaSource(memoryRegistry().fetcher)));
    expect(row).toMatchObject({ errorCode: PoisonCodes.UNSUPPORTED_FRAMING, rawEncoding: 'base64' });
  });

  it('a zlib body that inflates past the size limit is PAYLOAD_TOO_LARGE, stopped while inflating', async () => {
    const body = Buffer.alloc(2 * 1024 * 1024, 0x41);
    const row = poisonRow(
      await decodeWith(record(glueFrame(GLUE_AVRO, body, { zlib: true })), createSchemaSource(memoryRegistry().fetcher)),
    );
    expect(row).toMatchObject({
      errorCode: PoisonCodes.PAYLOAD_TOO_LARGE,
      errorMessage: `value inflates to more than the limit of ${limits.maxPayloadBytes} bytes`,
    });
  });

  it('asks the registry once per schema id, per container (the source caches it)', async () => {
    const registry = memoryRegistry();
    const source = createSchemaSource(registry.fetcher);
    const records = [record(framedAvro()), record(framedAvro()), record(framedAvro())];

    await resolveValueSchemas(records, { source });
    await resolveValueSchemas(records, { source });

    expect(registry.lookups).toEqual([`confluent:${SCHEMA_ID.avro}`]);
  });

  it('asks again after an outage: a failed lookup is not cached', async () => {
    let down = true;
    const lookups: number[] = [];
    const source = createSchemaSource(async (ref) => {
      lookups.push(ref.registry === 'confluent' ? ref.id : -1);
      if (down) throw new RegistryUnavailableError('down');
      return definitions.get(`confluent:${SCHEMA_ID.avro}`)!;
    });
    const r = record(framedAvro());

    expect((await decodeWith(r, source)).kind).toBe('unavailable');
    down = false;
    expect((await decodeWith(r, source)).kind).toBe('valid');
    expect(lookups).toEqual([SCHEMA_ID.avro, SCHEMA_ID.avro]);
  });
});

describe("a pinned schema (the consumer's valueSchema)", () => {
  it('reads unframed Avro values with no registry at all', async () => {
    const consumer: ConsumerDeclaration = { ...payments, valueSchema: { format: 'AVRO', definition: JSON.stringify(PAYMENT_AVRO) } };
    const eventId = randomUUID();

    const row = validRow(await decodeWith(record(avroPayment(paymentAvroValue(eventId))), undefined, consumer));

    expect(row.eventId).toBe(eventId);
  });

  it('reads Confluent-framed Protobuf values, skipping the header and honouring the message index', async () => {
    const consumer: ConsumerDeclaration = {
      ...payments,
      valueSchema: { format: 'PROTOBUF', definition: PAYMENT_PROTO, framing: 'confluent' },
    };
    const eventId = randomUUID();
    const body = Buffer.concat([confluentMessageIndexes([1]), protoPayment(paymentProtoValue(eventId))]);

    const row = validRow(await decodeWith(record(confluentFrame(4242, body)), undefined, consumer));

    expect(row.eventId).toBe(eventId);
  });
});

describe('Confluent REST over HTTP', () => {
  let registry: Awaited<ReturnType<typeof startLocalRegistry>>;
  beforeAll(async () => {
    registry = await startLocalRegistry([
      { id: SCHEMA_ID.avro, schema: JSON.stringify(PAYMENT_AVRO) },
      { id: SCHEMA_ID.proto, schemaType: 'PROTOBUF', schema: PAYMENT_PROTO },
    ]);
  });
  afterAll(() => registry.close());

  it('fetches Avro and Protobuf writer schemas by id, 404 as SCHEMA_NOT_FOUND, 503 as unavailable', async () => {
    const source = createSchemaSource(confluentFetcher({ url: registry.url, timeoutMs: 2_000 }));
    const avroRow = validRow(await decodeWith(record(framedAvro()), source));
    const protoBody = Buffer.concat([confluentMessageIndexes([1]), protoPayment(paymentProtoValue(randomUUID()))]);
    const protoRow = validRow(await decodeWith(record(confluentFrame(SCHEMA_ID.proto, protoBody)), source));
    const missing = poisonRow(await decodeWith(record(confluentFrame(555, Buffer.from([0]))), source));
    registry.down();
    const during = await decodeWith(record(confluentFrame(556, Buffer.from([0]))), source);
    registry.up();

    expect(avroRow.occurredAt).toBe('2026-07-03T09:15:30.250Z');
    expect(protoRow.occurredAt).toBe('2026-07-03T09:15:30.250000001Z');
    expect(missing.errorCode).toBe(PoisonCodes.SCHEMA_NOT_FOUND);
    expect(during).toEqual({ kind: 'unavailable', reason: 'the Confluent registry answered HTTP 503' });
  });

  it('an unreachable registry (nothing listening) is unavailable', async () => {
    const source = createSchemaSource(confluentFetcher({ url: 'http://127.0.0.1:9', timeoutMs: 500 }));
    expect((await decodeWith(record(framedAvro()), source)).kind).toBe('unavailable');
  });

  function framedAvro() {
    return confluentFrame(SCHEMA_ID.avro, avroPayment(paymentAvroValue(randomUUID())));
  }
});

describe('message indexes', () => {
  it.each([
    ['00', [0x00], [0]],
    ['02 02', [0x02, 0x02], [1]],
    ['04 02 00', [0x04, 0x02, 0x00], [1, 0]],
  ])('Confluent %s', async (_label, bytes, path) => {
    const { readMessageIndexes } = await import('../../../functions/wings/decoding/framing');
    expect(readMessageIndexes(Buffer.from([...bytes, 0x0a]), 'confluent')).toEqual({ path, offset: bytes.length });
    expect([...confluentMessageIndexes(path)]).toEqual(bytes);
  });
});

describe('Confluent schema references', () => {
  let registry: Awaited<ReturnType<typeof startLocalRegistry>>;
  beforeAll(async () => {
    registry = await startLocalRegistry(
      [
        ...REFERENCED_SCHEMAS,
        // A second envelope schema using the same Money (its subject is read once).
        { ...REFERENCED_SCHEMAS.find((s) => s.id === REFERENCE_IDS.avroPayment)!, id: 204 },
        // Using a subject version the registry does not have.
        {
          id: 205,
          schema: JSON.stringify({ type: 'record', name: 'Gone', fields: [{ name: 'm', type: 'payments.v1.Money' }] }),
          references: [{ name: 'payments.v1.Money', subject: 'payments.v1.Money', version: 9 }],
        },
        // Importing a file it does not reference.
        {
          id: 206,
          schemaType: 'PROTOBUF',
          schema: 'syntax = "proto3";\nimport "payments/v1/money.proto";\nmessage P { payments.v1.Money m = 1; }\n',
        },
        // A registry answering a cycle: A uses B, B uses A.
        { id: 207, schema: '"string"', references: [{ name: 'a', subject: 'loop-a', version: 1 }] },
        { id: 208, schema: '"string"', references: [{ name: 'b', subject: 'loop-b', version: 1 }] },
        { id: 209, schema: '"string"', references: [{ name: 'a', subject: 'loop-a', version: 1 }] },
      ],
      {
        subjects: [...REFERENCED_SUBJECTS, { subject: 'loop-a', version: 1, id: 208 }, { subject: 'loop-b', version: 1, id: 209 }],
      },
    );
  });
  afterAll(() => registry.close());

  const source = () => createSchemaSource(confluentFetcher({ url: registry.url, timeoutMs: 2_000 }));
  const paths = (from: number) =>
    registry
      .log()
      .slice(from)
      .map((r) => `${r.status} ${r.path}`);

  it('Avro: resolves the referenced subjects by version, a reference within a reference too, and decodes with their named types', async () => {
    const eventId = randomUUID();
    const from = registry.log().length;

    const row = validRow(await decodeWith(record(avroPaymentValue(eventId)), source()));

    expect(row.envelopeJson).toBe(
      `{"event_id":"${eventId}","event_type":"payment.completed","event_version":1,"org_id":"${REFERENCE_ORG}","aggregate_id":"pay-7001","occurred_at":"2026-07-03T09:15:30.250Z","payload":${REFERENCED_AVRO_PAYLOAD_JSON}}`,
    );
    expect(paths(from)).toEqual([
      '200 /schemas/ids/203',
      '200 /subjects/payments.v1.Money/versions/1',
      '200 /subjects/payments.v1.Currency/versions/1',
    ]);
  });

  it('Protobuf: resolves the imported files by subject and version; message indexes count the schema’s own file', async () => {
    const eventId = randomUUID();
    const from = registry.log().length;

    const row = validRow(await decodeWith(record(protoPaymentValue(eventId)), source()));

    expect(row.envelopeJson).toBe(
      `{"event_id":"${eventId}","event_type":"payment.completed","event_version":1,"org_id":"${REFERENCE_ORG}","aggregate_id":"pay-7002","occurred_at":"2026-07-03T09:15:30.250000000Z","payload":${REFERENCED_PROTO_PAYLOAD_JSON}}`,
    );
    expect(paths(from)).toEqual([
      '200 /schemas/ids/213',
      '200 /subjects/payments-money-proto/versions/1',
      '200 /subjects/payments-currency-proto/versions/1',
    ]);
  });

  it('keeps a subject version for the container: a second schema using it asks for the schema only', async () => {
    const shared = source();
    await decodeWith(record(avroPaymentValue(randomUUID())), shared);
    const from = registry.log().length;
    const value = Buffer.from(avroPaymentValue(randomUUID()));
    value.writeUInt32BE(204, 1);

    validRow(await decodeWith(record(value), shared));

    expect(paths(from)).toEqual(['200 /schemas/ids/204']);
  });

  it('a referenced subject version the registry lacks is SCHEMA_NOT_FOUND, naming it', async () => {
    const row = poisonRow(await decodeWith(record(confluentFrame(205, Buffer.from([0]))), source()));

    expect(row).toMatchObject({
      errorCode: PoisonCodes.SCHEMA_NOT_FOUND,
      errorMessage: 'the registry has no payments.v1.Money version 9, which the schema references as payments.v1.Money (confluent)',
    });
  });

  it('an import that is neither a reference nor a well-known type, and references in a cycle, do not compile: SCHEMA_MISMATCH', async () => {
    const unreferenced = poisonRow(await decodeWith(record(confluentFrame(206, Buffer.from([0, 0x0a, 0]))), source()));
    const cycle = poisonRow(await decodeWith(record(confluentFrame(207, Buffer.from([0]))), source()));

    expect(unreferenced.errorCode).toBe(PoisonCodes.SCHEMA_MISMATCH);
    expect(unreferenced.errorMessage).toBe(
      'the writer schema (schema id 206) does not compile: the .proto imports payments/v1/money.proto, which is neither a well-known type nor a schema reference',
    );
    expect(cycle.errorCode).toBe(PoisonCodes.SCHEMA_MISMATCH);
    expect(cycle.errorMessage).toBe(
      "the writer schema (schema id 207) does not compile: the schema's references form a cycle: loop-a version 1 → loop-b version 1 → loop-a version 1",
    );
  });
});
