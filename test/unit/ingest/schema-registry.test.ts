/**
 * Decoding the records of a schema-registry-backed mapping (fixtures: test/fixtures/schema-registry),
 * in both record formats the mapping offers. The consumer's envelope schema, size limit and
 * poison rules apply to what the mapping delivered.
 */
import { describe, expect, it } from 'vitest';
import { getConsumer } from '../../../functions/consumers';
import { binaryValueReader } from '../../../functions/wings/decoding/binary-values';
import { decodeRecord } from '../../../functions/ingest/decode';
import { PoisonCodes } from '../../../functions/ingest/poison-codes';
import type { KafkaRecord } from '../../../functions/ingest/types';
import { fixtureRecord, JSON_RECORD_FORMAT, SOURCE_RECORD_FORMAT } from '../../fixtures/schema-registry/events';

const consumer = getConsumer('notification-service');
// Read as the handler reads them: through the decoding wing (here with no registry and no pinned schema).
const decode = (record: KafkaRecord, maxPayloadBytes = 256 * 1024) =>
  decodeRecord(record, consumer, { maxPayloadBytes }, binaryValueReader({}));

describe('EventRecordFormat JSON', () => {
  it('stores an Avro value the mapping converted to JSON, with its validated key as JSON text', () => {
    const record = fixtureRecord(JSON_RECORD_FORMAT, 0, 40);

    const d = decode(record);

    expect(d).toMatchObject({
      kind: 'valid',
      row: {
        eventId: '9b2f6a4e-0c1d-4e2f-8a3b-4c5d6e7f8091',
        eventType: 'payment.completed',
        tenantId: '7d1f2c4e-8a9b-4c3d-9e8f-1a2b3c4d5e6f',
        aggregateId: 'pay-4001',
        recordKey: '"pay-4001"',
        recordKeyEncoding: 'utf8',
        headers: { traceparent: 't-4001' },
        topic: 'payment.completed',
        partition: 0,
        offset: 40,
      },
    });
    expect(d.kind === 'valid' && d.row.envelopeJson).toBe(Buffer.from(record.value!, 'base64').toString('utf8'));
  });

  it('stores a Protobuf value the mapping converted to JSON', () => {
    expect(decode(fixtureRecord(JSON_RECORD_FORMAT, 0, 42))).toMatchObject({
      kind: 'valid',
      row: { eventId: '2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e', offset: 42 },
    });
  });

  it('stores a record whose key was not validated (no keySchemaMetadata) with its key as sent', () => {
    expect(decode(fixtureRecord(JSON_RECORD_FORMAT, 1, 7))).toMatchObject({ kind: 'valid', row: { recordKey: 'pay-4004', offset: 7 } });
  });

  it('poisons a converted value that breaks the envelope, naming the field and the schema', () => {
    const record = fixtureRecord(JSON_RECORD_FORMAT, 0, 41);

    const d = decode(record);

    expect(d).toMatchObject({
      kind: 'poison',
      row: {
        errorCode: PoisonCodes.ENVELOPE_INVALID,
        rawEncoding: 'utf8',
        rawValue: Buffer.from(record.value!, 'base64').toString('utf8'),
        recordKey: '"pay-4002"',
      },
    });
    expect(d.kind === 'poison' && d.row.errorMessage).toMatch(
      /^occurred_at: .* \(value validated against AVRO schema 3f2a9c1e-5b7d-4e8f-9a01-23456789abcd\)$/,
    );
  });

  it('applies the size limit to the converted JSON', () => {
    const record = fixtureRecord(JSON_RECORD_FORMAT, 0, 40);
    const size = Buffer.from(record.value!, 'base64').length;

    expect(decode(record, size - 1)).toMatchObject({ kind: 'poison', row: { errorCode: PoisonCodes.PAYLOAD_TOO_LARGE } });
    expect(decode(record, size).kind).toBe('valid');
  });
});

describe('EventRecordFormat SOURCE', () => {
  it.each([
    [50, 'AVRO', '1001', 'not UTF-8'],
    [51, 'PROTOBUF', '1002', 'UTF-8 but not JSON'],
  ])(
    'with neither a registry nor a pinned schema, poisons offset %i, %s bytes of schema %s (%s), as UNSUPPORTED_SOURCE_FORMAT, keeping them as base64',
    (offset, format, schemaId) => {
      const record = fixtureRecord(SOURCE_RECORD_FORMAT, 2, offset);

      const d = decode(record);

      expect(d).toMatchObject({
        kind: 'poison',
        row: { errorCode: PoisonCodes.UNSUPPORTED_SOURCE_FORMAT, rawValue: record.value, rawEncoding: 'base64', offset },
      });
      expect(d.kind === 'poison' && d.row.errorMessage).toBe(
        `value is ${format} schema ${schemaId} in its binary source encoding, and the consumer declares neither a schema registry nor a pinned schema to read it with`,
      );
    },
  );

  it("stores a JSON Schema value: its source bytes are the producer's JSON", () => {
    expect(decode(fixtureRecord(SOURCE_RECORD_FORMAT, 2, 52))).toMatchObject({
      kind: 'valid',
      row: { eventId: '6f7a8b9c-0d1e-4f2a-9b3c-5d6e7f8091a2', recordKey: 'pay-5003' },
    });
  });

  it('poisons a JSON Schema value that breaks the envelope as ENVELOPE_INVALID, not as a format problem', () => {
    const d = decode(fixtureRecord(SOURCE_RECORD_FORMAT, 2, 53));

    expect(d).toMatchObject({ kind: 'poison', row: { errorCode: PoisonCodes.ENVELOPE_INVALID, rawEncoding: 'utf8' } });
    expect(d.kind === 'poison' && d.row.errorMessage).toMatch(/^event_version: .* \(value validated against JSON schema 1003\)$/);
  });

  it('without valueSchemaMetadata, the same Avro bytes are what they look like: INVALID_UTF8', () => {
    const { valueSchemaMetadata: _, ...bare } = fixtureRecord(SOURCE_RECORD_FORMAT, 2, 50);

    expect(decode(bare)).toMatchObject({
      kind: 'poison',
      row: { errorCode: PoisonCodes.INVALID_UTF8, errorMessage: 'value is not valid UTF-8' },
    });
  });

  it('quotes no metadata that is not an id (the field comes from the event, not from us)', () => {
    const record = {
      ...fixtureRecord(SOURCE_RECORD_FORMAT, 2, 53),
      valueSchemaMetadata: { dataFormat: 'JSON', schemaId: 'a b {"secret":1}' },
    };

    const d = decode(record);

    expect(d.kind === 'poison' && d.row.errorMessage).toMatch(/\(value validated against JSON schema \(no id\)\)$/);
  });
});
