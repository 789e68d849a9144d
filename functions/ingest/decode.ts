/**
 * One Kafka record → an inbox row, or a poison row with a stable reason code.
 *
 * Strict at every step, because Node is lenient by default: Buffer.from(s, 'base64') skips
 * characters that are not base64, and Buffer#toString('utf8') replaces invalid bytes with
 * U+FFFD. Either would store something the producer never sent. The steps, in order:
 *
 *   tombstone → base64 → size limit → UTF-8 → JSON → object → storable → envelope
 *
 * "Storable" is PostgreSQL's view: jsonb refuses the escape \u0000 and unpaired UTF-16
 * surrogates (SQLSTATE 22P05), text refuses NUL. One such record would fail the whole
 * multi-row INSERT, so it is caught here; the bisecting store in store-batch.ts is the
 * backstop for anything this check does not foresee.
 *
 * This module is the record: its key, headers and the row it becomes. The value's steps and
 * the strict byte and text conversions are decode-value.ts; a value that is not plain JSON
 * text (registry-framed, the mapping's SOURCE format, a pinned schema's) is read by the
 * reader the decoding wing gives (its ValueDecoder seam).
 *
 * Records of a consumer whose mapping validates against a schema registry (Glue or
 * Confluent, docs/ingest.md "Schema registries") take the same steps: with the JSON record
 * format the mapping has already turned Avro or Protobuf into JSON text, so the envelope,
 * size and poison rules judge what the mapping delivered, and a poison reason names the
 * schema the mapping reported (valueSchemaOf).
 *
 * Nothing here logs or returns a value of the record except the raw value kept in the
 * poison row itself: error messages carry field paths, rules and the schema's id only.
 */
import type { ConsumerDeclaration } from '../framework/types';
import type { InboxInsert } from '../inbox/insert-batch';
import type { PoisonInsert } from '../inbox/record-poison';
import { carrierFromHeaders } from '../lib/tracing';
import {
  decodeBase64,
  decodeValue,
  encodeBytes,
  jsonValues,
  replaceUnstorable,
  storableUtf8,
  type DecodeLimits,
  type ValueReader,
} from './decode-value';
import { isStorableText } from './json-text';
import { PoisonCodes, type PoisonCode } from './poison-codes';
import type { KafkaRecord, SchemaMetadata } from './types';

/**
 * `unavailable`: the value names a writer schema the registry could not be asked for now;
 * the record is neither stored nor poisoned but handed back to the mapping (ingest.ts).
 */
export type Decoded = { kind: 'valid'; row: InboxInsert } | { kind: 'poison'; row: PoisonInsert } | { kind: 'unavailable'; reason: string };

/** What may be quoted of the mapping's metadata in a poison reason: an id, not free text. */
const METADATA_TOKEN = /^[A-Za-z0-9._:-]{1,128}$/;

/** The value's schema as the mapping reported it, or null when the record carries none. */
export function valueSchemaOf(record: KafkaRecord): { format: string; id: string | null } | null {
  const meta: SchemaMetadata | undefined = record.valueSchemaMetadata;
  if (typeof meta !== 'object' || meta === null) return null;
  const token = (v: unknown) => (typeof v === 'string' && METADATA_TOKEN.test(v) ? v : null);
  const format = token(meta.dataFormat);
  return format === null ? null : { format: format.toUpperCase(), id: token(meta.schemaId) };
}

export function decodeKey(key: string | null | undefined): { recordKey: string | null; recordKeyEncoding: 'utf8' | 'base64' } {
  if (key === undefined || key === null) return { recordKey: null, recordKeyEncoding: 'utf8' };
  const bytes = decodeBase64(key);
  if (bytes === null) return { recordKey: replaceUnstorable(key), recordKeyEncoding: 'base64' };
  const { text, encoding } = encodeBytes(bytes, key);
  return { recordKey: text, recordKeyEncoding: encoding };
}

/**
 * The common header value (a trace id, a content type): short ASCII without NUL, read
 * straight from the byte list. Anything else (non-ASCII, NUL, not a byte) returns null for
 * the Buffer and TextDecoder path, which took a third of a millisecond per 500 records.
 */
function asciiText(bytes: readonly unknown[]): string | null {
  if (bytes.length > 256) return null;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i] as number;
    if ((b & 0x7f) !== b || b === 0) return null;
  }
  return String.fromCharCode.apply(null, bytes as number[]);
}

/**
 * Headers as a JSON object: name → UTF-8 string, or `{ "base64": "…" }` for a value that
 * is not storable text. A name repeated in the record (Kafka allows it) maps to an array
 * of its values in order. Names come from the event's JSON; an unstorable character in a
 * name is replaced with U+FFFD. The object has no prototype: a header named `__proto__`,
 * `toString` or `constructor` is a name like any other, stored as sent.
 */
export function decodeHeaders(headers: KafkaRecord['headers']): Record<string, unknown> {
  const out = Object.create(null) as Record<string, unknown>;
  if (!Array.isArray(headers)) return out;
  for (const header of headers) {
    if (typeof header !== 'object' || header === null) continue;
    for (const [rawName, rawValue] of Object.entries(header)) {
      const name = isStorableText(rawName) ? rawName : replaceUnstorable(rawName);
      const byteList: unknown[] = Array.isArray(rawValue) ? rawValue : [];
      let value: unknown = asciiText(byteList);
      if (value === null) {
        const bytes = Buffer.from(byteList as number[]);
        value = storableUtf8(bytes) ?? { base64: bytes.toString('base64') };
      }
      const existing = out[name];
      if (existing === undefined) out[name] = value;
      else if (Array.isArray(existing)) existing.push(value);
      else out[name] = [existing, value];
    }
  }
  return out;
}

/**
 * A poison row for a record that could not be decoded at all (decoding itself threw):
 * the value exactly as the event carried it (base64), no headers.
 */
export function undecodedPoison(record: KafkaRecord, errorCode: PoisonCode, errorMessage: string): PoisonInsert {
  const value = typeof record.value === 'string' && record.value !== '' ? record.value : null;
  let key: ReturnType<typeof decodeKey> = { recordKey: null, recordKeyEncoding: 'utf8' };
  try {
    key = decodeKey(record.key);
  } catch {
    // keep the row without its key rather than lose it
  }
  return {
    topic: record.topic,
    partition: record.partition,
    offset: record.offset,
    ...key,
    rawValue: value === null ? null : replaceUnstorable(value),
    rawEncoding: value === null ? 'none' : 'base64',
    headers: {},
    errorCode,
    errorMessage,
    recordTimestampMs: timestampOf(record),
  };
}

function timestampOf(record: KafkaRecord): number | null {
  return typeof record.timestamp === 'number' && Number.isFinite(record.timestamp) ? record.timestamp : null;
}

/**
 * The poison reason of a record whose mapping validated its value names the schema (an id,
 * never free text), so that a burst traces back to a producer's schema.
 */
function withValueSchema(record: KafkaRecord, code: PoisonCode, message: string): string {
  const schema = valueSchemaOf(record);
  if (schema === null || code === PoisonCodes.UNSUPPORTED_SOURCE_FORMAT) return message;
  return `${message} (value validated against ${schema.format} schema ${schema.id ?? '(no id)'})`;
}

export function decodeRecord(
  record: KafkaRecord,
  consumer: Pick<ConsumerDeclaration, 'dialect' | 'envelopeDefaults'>,
  limits: DecodeLimits,
  read: ValueReader = jsonValues,
): Decoded {
  const v = decodeValue(record, consumer, limits, read);
  if (!v.ok && 'unavailable' in v) return { kind: 'unavailable', reason: v.unavailable };
  const { recordKey, recordKeyEncoding } = decodeKey(record.key);
  const headers = decodeHeaders(record.headers);
  if (!v.ok) {
    const message = withValueSchema(record, v.code, v.message);
    return {
      kind: 'poison',
      row: {
        topic: record.topic,
        partition: record.partition,
        offset: record.offset,
        recordKey,
        recordKeyEncoding,
        rawValue: v.raw.text,
        rawEncoding: v.raw.encoding,
        headers,
        errorCode: v.code,
        errorMessage: message,
        recordTimestampMs: timestampOf(record),
      },
    };
  }
  const e = v.envelope;
  // Named fields, not `...v.envelope`: spreading one object into a literal that then grows
  // cost about 5 µs a record here (two thirds of all decoding, measured with the bench's records).
  return {
    kind: 'valid',
    row: {
      eventId: e.eventId,
      eventType: e.eventType,
      eventVersion: e.eventVersion,
      occurredAt: e.occurredAt,
      producer: e.producer,
      correlationId: e.correlationId,
      causationId: e.causationId,
      aggregateType: e.aggregateType,
      aggregateId: e.aggregateId,
      aggregateVersion: e.aggregateVersion,
      partitionKey: e.partitionKey,
      tenantId: e.tenantId,
      recordKey,
      recordKeyEncoding,
      topic: record.topic,
      partition: record.partition,
      offset: record.offset,
      envelopeJson: v.text,
      headers,
      traceContext: carrierFromHeaders(headers),
    },
  };
}
