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
 * multi-row INSERT, so it is caught here; the bisecting store in ingest.ts is the
 * backstop for anything this check does not foresee.
 *
 * Records of a consumer whose mapping validates against a schema registry (Glue or
 * Confluent, docs/ingest.md "Schema registries") take the same steps: with the JSON record
 * format the mapping has already turned Avro or Protobuf into JSON text, so the envelope,
 * size and poison rules judge what the mapping delivered. With the SOURCE format an Avro or
 * Protobuf value stays the producer's binary encoding, which this inbox cannot read: it
 * becomes poison UNSUPPORTED_SOURCE_FORMAT (told apart from INVALID_UTF8/INVALID_JSON by
 * the record's valueSchemaMetadata), so the reason names the fix rather than a symptom.
 *
 * Nothing here logs or returns a value of the record except the raw value kept in the
 * poison row itself: error messages carry field paths, rules and the schema's id only.
 */
import { normalizeEnvelope, type NormalizedEnvelope } from '../consumers/envelopes';
import type { ConsumerDeclaration } from '../consumers/types';
import type { InboxInsert } from '../inbox/insert-batch';
import type { PoisonInsert } from '../inbox/record-poison';
import type { KafkaRecord, SchemaMetadata } from './types';

/** The reasons a record becomes a poison row. Stable: alarms, dashboards and runbooks use them. */
export const PoisonCodes = {
  TOMBSTONE: 'TOMBSTONE',
  INVALID_BASE64: 'INVALID_BASE64',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  INVALID_UTF8: 'INVALID_UTF8',
  INVALID_JSON: 'INVALID_JSON',
  NOT_AN_OBJECT: 'NOT_AN_OBJECT',
  ENVELOPE_INVALID: 'ENVELOPE_INVALID',
  UNSTORABLE_VALUE: 'UNSTORABLE_VALUE',
  UNSUPPORTED_SOURCE_FORMAT: 'UNSUPPORTED_SOURCE_FORMAT',
  INGEST_FAILED: 'INGEST_FAILED',
} as const;

export type PoisonCode = (typeof PoisonCodes)[keyof typeof PoisonCodes];

export type Decoded = { kind: 'valid'; row: InboxInsert } | { kind: 'poison'; row: PoisonInsert };

export interface DecodeLimits {
  /** Largest accepted record value in bytes (the whole envelope, before any parsing). */
  maxPayloadBytes: number;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
// A JSON escape that jsonb refuses: \u0000, or a surrogate (paired ones pass the walk below).
const SUSPECT_ESCAPE = /\\u(?:0000|[dD][89abcdefABCDEF])/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The bytes of strict base64 as the ESM writes it (standard alphabet, padded, canonical),
 * or null. Checked by round trip: Node's decoder skips what it does not understand and
 * accepts the URL-safe alphabet, so only re-encoding to the same text proves the decoding
 * lost nothing. Cheaper than a pattern over the whole value, too.
 */
function decodeBase64(s: string): Buffer | null {
  const bytes = Buffer.from(s, 'base64');
  return bytes.toString('base64') === s ? bytes : null;
}

/** Text PostgreSQL stores as it is: no NUL, no unpaired surrogate. */
export function isStorableText(s: string): boolean {
  return !s.includes('\u0000') && !LONE_SURROGATE.test(s);
}

/** Bytes as text when they are valid UTF-8 that PostgreSQL can store, else null. */
function storableUtf8(bytes: Uint8Array): string | null {
  try {
    const s = utf8.decode(bytes);
    return s.includes('\u0000') ? null : s;
  } catch {
    return null;
  }
}

/** Text or base64, whichever keeps the bytes exactly. `base64` is the ESM's own encoding of them. */
function encodeBytes(bytes: Uint8Array, base64: string): { text: string; encoding: 'utf8' | 'base64' } {
  const s = storableUtf8(bytes);
  return s === null ? { text: base64, encoding: 'base64' } : { text: s, encoding: 'utf8' };
}

function replaceUnstorable(s: string): string {
  return s.replace(/\u0000/g, '\uFFFD').replace(new RegExp(LONE_SURROGATE.source, 'g'), '\uFFFD');
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
 * name is replaced with U+FFFD.
 */
export function decodeHeaders(headers: KafkaRecord['headers']): Record<string, unknown> {
  const out: Record<string, unknown> = {};
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

/** The path of the first string or member name PostgreSQL would refuse, or null. */
function findUnstorable(value: unknown, path: string): string | null {
  if (typeof value === 'string') return isStorableText(value) ? null : path || '(value)';
  if (typeof value !== 'object' || value === null) return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findUnstorable(value[i], `${path}[${i}]`);
      if (found !== null) return found;
    }
    return null;
  }
  for (const [name, member] of Object.entries(value)) {
    const memberPath = path ? `${path}.${isStorableText(name) ? name : '<name>'}` : isStorableText(name) ? name : '<name>';
    if (!isStorableText(name)) return `${memberPath} (member name)`;
    const found = findUnstorable(member, memberPath);
    if (found !== null) return found;
  }
  return null;
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

type Raw = { text: string | null; encoding: 'utf8' | 'base64' | 'none' };

type ValueResult =
  | { ok: true; envelope: NormalizedEnvelope; text: string }
  | { ok: false; code: PoisonCode; message: string; raw: Raw };

const fail = (code: PoisonCode, message: string, raw: Raw): ValueResult => ({ ok: false, code, message, raw });

/** The data formats a registry encodes in binary: their SOURCE bytes are not JSON. */
const BINARY_FORMATS = new Set(['AVRO', 'PROTOBUF']);
/** What may be quoted of the mapping's metadata in a poison reason: an id, not free text. */
const METADATA_TOKEN = /^[A-Za-z0-9._:-]{1,128}$/;

/** The value's schema as the mapping reported it, or null when the record carries none. */
function valueSchemaOf(record: KafkaRecord): { format: string; id: string | null } | null {
  const meta: SchemaMetadata | undefined = record.valueSchemaMetadata;
  if (typeof meta !== 'object' || meta === null) return null;
  const token = (v: unknown) => (typeof v === 'string' && METADATA_TOKEN.test(v) ? v : null);
  const format = token(meta.dataFormat);
  return format === null ? null : { format: format.toUpperCase(), id: token(meta.schemaId) };
}

/**
 * The poison reason of a record whose mapping validated its value: a binary format whose
 * bytes are not JSON was delivered in the SOURCE record format; anything else keeps its
 * code. The schema is named either way, so that a burst traces back to a producer's schema.
 */
function withValueSchema(record: KafkaRecord, code: PoisonCode, message: string, raw: Raw): { code: PoisonCode; message: string; raw: Raw } {
  const schema = valueSchemaOf(record);
  if (schema === null) return { code, message, raw };
  const named = `${schema.format} schema ${schema.id ?? '(no id)'}`;
  if (BINARY_FORMATS.has(schema.format) && (code === PoisonCodes.INVALID_UTF8 || code === PoisonCodes.INVALID_JSON)) {
    return {
      code: PoisonCodes.UNSUPPORTED_SOURCE_FORMAT,
      message: `value is ${named} in its binary source encoding: the inbox stores JSON, so the mapping's schema registry must deliver the JSON record format`,
      // Binary even where its bytes happen to be valid UTF-8 (Protobuf often is): kept as the event's base64.
      raw: { text: record.value as string, encoding: 'base64' },
    };
  }
  return { code, message: `${message} (value validated against ${named})`, raw };
}

/** The value's steps, from the ESM's base64 to a normalized envelope. */
function decodeValue(
  value: string | null | undefined,
  consumer: Pick<ConsumerDeclaration, 'dialect' | 'envelopeDefaults'>,
  limits: DecodeLimits,
): ValueResult {
  if (value === undefined || value === null || value === '') {
    return fail(PoisonCodes.TOMBSTONE, 'record has no value (tombstone)', { text: null, encoding: 'none' });
  }
  const bytes = decodeBase64(value);
  if (bytes === null) {
    // Kept exactly as the event carried it, so that an operator sees what arrived.
    return fail(PoisonCodes.INVALID_BASE64, 'value is not valid base64', { text: replaceUnstorable(value), encoding: 'base64' });
  }
  if (bytes.length > limits.maxPayloadBytes) {
    return fail(
      PoisonCodes.PAYLOAD_TOO_LARGE,
      `value is ${bytes.length} bytes, over the limit of ${limits.maxPayloadBytes}`,
      encodeBytes(bytes, value),
    );
  }
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return fail(PoisonCodes.INVALID_UTF8, 'value is not valid UTF-8', { text: value, encoding: 'base64' });
  }
  // Everything below keeps the value as text unless it holds a NUL (text refuses it).
  const raw: Raw = text.includes('\u0000') ? { text: value, encoding: 'base64' } : { text, encoding: 'utf8' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not the parser's message: it quotes the input.
    return fail(PoisonCodes.INVALID_JSON, 'value is not valid JSON', raw);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    const kind = parsed === null ? 'null' : Array.isArray(parsed) ? 'an array' : `a ${typeof parsed}`;
    return fail(PoisonCodes.NOT_AN_OBJECT, `value is JSON ${kind}, not an object`, raw);
  }
  if (SUSPECT_ESCAPE.test(text)) {
    const at = findUnstorable(parsed, '');
    if (at !== null) {
      return fail(PoisonCodes.UNSTORABLE_VALUE, `${at}: contains \\u0000 or an unpaired surrogate, which PostgreSQL cannot store`, raw);
    }
  }
  const result = normalizeEnvelope(consumer, parsed);
  if (!result.ok) return fail(PoisonCodes.ENVELOPE_INVALID, result.message, raw);
  return { ok: true, envelope: result.envelope, text };
}

export function decodeRecord(
  record: KafkaRecord,
  consumer: Pick<ConsumerDeclaration, 'dialect' | 'envelopeDefaults'>,
  limits: DecodeLimits,
): Decoded {
  const { recordKey, recordKeyEncoding } = decodeKey(record.key);
  const headers = decodeHeaders(record.headers);
  const v = decodeValue(record.value, consumer, limits);
  if (!v.ok) {
    const reason = withValueSchema(record, v.code, v.message, v.raw);
    return {
      kind: 'poison',
      row: {
        topic: record.topic,
        partition: record.partition,
        offset: record.offset,
        recordKey,
        recordKeyEncoding,
        rawValue: reason.raw.text,
        rawEncoding: reason.raw.encoding,
        headers,
        errorCode: reason.code,
        errorMessage: reason.message,
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
    },
  };
}
