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
import { createHash } from 'node:crypto';
import { normalizeEnvelope, type NormalizedEnvelope } from '../framework/envelopes';
import type { ConsumerDeclaration } from '../framework/types';
import type { InboxInsert } from '../inbox/insert-batch';
import type { PoisonInsert } from '../inbox/record-poison';
import { BodyTooLargeError, inflateBody, readFraming, refFromMetadata, refKey, type RegistryKind, type SchemaRef } from './framing';
import { findUnstorable, isStorableText, jsonDepth, ValueTooDeepError } from './json-text';
import { RegistryUnavailableError, SchemaNotFoundError, type SchemaSource, type SchemaTable } from './schema-source';
import type { KafkaRecord, SchemaMetadata } from './types';
import type { CompiledSchema } from './writer-schema';

export { isStorableText } from './json-text';

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
  /** JSON nested deeper than MAX_JSON_DEPTH (before anything else is judged), or a decoded value that would be. */
  JSON_TOO_DEEP: 'JSON_TOO_DEEP',
  /** The registry has no schema with the id (or version id) the value names, or no registry is declared to ask. */
  SCHEMA_NOT_FOUND: 'SCHEMA_NOT_FOUND',
  /** The bytes do not decode with the writer schema they name (or the schema itself does not compile). */
  SCHEMA_MISMATCH: 'SCHEMA_MISMATCH',
  /** A leading byte that is neither JSON nor a Confluent (0x00) or Glue (0x03) header, or a broken header. */
  UNSUPPORTED_FRAMING: 'UNSUPPORTED_FRAMING',
  INGEST_FAILED: 'INGEST_FAILED',
} as const;

export type PoisonCode = (typeof PoisonCodes)[keyof typeof PoisonCodes];

/**
 * `unavailable`: the value names a writer schema the registry could not be asked for now;
 * the record is neither stored nor poisoned but handed back to the mapping (ingest.ts).
 */
export type Decoded = { kind: 'valid'; row: InboxInsert } | { kind: 'poison'; row: PoisonInsert } | { kind: 'unavailable'; reason: string };

export interface DecodeLimits {
  /** Largest accepted record value in bytes (the whole envelope, before any parsing; and as JSON, once decoded). */
  maxPayloadBytes: number;
  /** Deepest accepted nesting of objects and arrays in a value (DEFAULTS.maxJsonDepth when absent). */
  maxJsonDepth?: number;
}

export const DEFAULT_MAX_JSON_DEPTH = 64;

/** What an oversized value's poison row keeps of it: this many bytes from its start. */
export const OVERSIZED_PREFIX_BYTES = 4 * 1024;

/** The writer schemas a record's value may name: a consumer's pinned schema, and those its registry gave for this batch. */
export interface ValueSchemas {
  /** The consumer's `valueSchema`, compiled, with the framing its values carry. */
  pinned?: { schema: CompiledSchema; framing: 'confluent' | 'glue' | 'none' };
  /** Resolved for this batch by the consumer's registry; absent when it declares none. */
  table?: SchemaTable;
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

type ValueResult = { ok: true; envelope: NormalizedEnvelope; text: string } | { ok: false; code: PoisonCode; message: string; raw: Raw };

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
 * The poison reason of a record whose mapping validated its value names the schema (an id,
 * never free text), so that a burst traces back to a producer's schema.
 */
function withValueSchema(record: KafkaRecord, code: PoisonCode, message: string): string {
  const schema = valueSchemaOf(record);
  if (schema === null || code === PoisonCodes.UNSUPPORTED_SOURCE_FORMAT) return message;
  return `${message} (value validated against ${schema.format} schema ${schema.id ?? '(no id)'})`;
}

/** The first bytes of a value, from the start of its base64: enough for any registry header. */
function peek(value: string): Uint8Array {
  return Buffer.from(value.slice(0, 24), 'base64');
}

const OPEN_BRACE = 0x7b;

/**
 * How a value must be read, from its first bytes, its schema metadata and the consumer's
 * pinned schema (docs/ingest.md, "Binary values"):
 *   json     JSON text (plain JSON, JSON record format, a JSON Schema SOURCE value);
 *   pinned   the consumer's own schema reads the body (after its declared framing);
 *   lookup   the writer schema the value names, from the registry;
 *   poison   framing this inbox does not read.
 * With AVRO or PROTOBUF metadata, a value starting with `{` is the mapping's JSON record
 * format; anything else is the SOURCE format's body, named by the metadata's schema id.
 */
type ValueRoute =
  | { kind: 'json' }
  | { kind: 'pinned'; framed: boolean; registry: RegistryKind | 'none' }
  | { kind: 'lookup'; ref: SchemaRef; framed: boolean }
  | { kind: 'source-without-registry' }
  | { kind: 'poison'; code: PoisonCode; message: string };

const JSON_ROUTE: ValueRoute = { kind: 'json' };

function routeOf(head: Uint8Array, record: KafkaRecord, schemas: ValueSchemas): ValueRoute {
  const meta = valueSchemaOf(record);
  if (meta !== null && BINARY_FORMATS.has(meta.format)) {
    if (head[0] === OPEN_BRACE) return { kind: 'json' };
    const ref = refFromMetadata(meta.id);
    if (schemas.pinned) return { kind: 'pinned', framed: false, registry: ref?.registry ?? 'none' };
    if (ref === null || schemas.table === undefined) return { kind: 'source-without-registry' };
    return { kind: 'lookup', ref, framed: false };
  }
  if (meta !== null) return { kind: 'json' };
  if (schemas.pinned?.framing === 'none')
    return schemas.pinned.schema.format === 'JSON' ? { kind: 'json' } : { kind: 'pinned', framed: false, registry: 'none' };
  const framing = readFraming(head);
  if (framing.kind === 'none') return { kind: 'json' };
  if (framing.kind === 'unsupported') return { kind: 'poison', code: PoisonCodes.UNSUPPORTED_FRAMING, message: framing.message };
  if (schemas.pinned) return { kind: 'pinned', framed: true, registry: framing.ref.registry };
  return { kind: 'lookup', ref: framing.ref, framed: true };
}

/** The writer schema a record's value names in the registry, or null (none, or not this record's business). Reads only its first bytes. */
export function schemaRefOf(record: KafkaRecord, schemas: ValueSchemas): SchemaRef | null {
  if (typeof record.value !== 'string' || record.value === '') return null;
  const route = routeOf(peek(record.value), record, schemas);
  return route.kind === 'lookup' ? route.ref : null;
}

/**
 * The writer schemas a batch's values name, each asked of `source` once (the source caches
 * them for the container), before any record is decoded: decoding itself stays synchronous.
 */
export async function resolveValueSchemas(
  records: readonly KafkaRecord[],
  options: { pinned?: ValueSchemas['pinned']; source?: SchemaSource },
): Promise<ValueSchemas> {
  const schemas: ValueSchemas = options.pinned === undefined ? {} : { pinned: options.pinned };
  if (options.source === undefined) return schemas;
  const probe: ValueSchemas = { ...schemas, table: new Map() };
  const refs: SchemaRef[] = [];
  for (const record of records) {
    const ref = schemaRefOf(record, probe);
    if (ref !== null) refs.push(ref);
  }
  return { ...schemas, table: refs.length === 0 ? new Map() : await options.source.resolve(refs) };
}

/** An oversized value's raw: its first bytes as text (cut at a character) when they are storable UTF-8, else as base64. */
function prefixOf(bytes: Uint8Array): Raw {
  const prefix = bytes.subarray(0, OVERSIZED_PREFIX_BYTES);
  for (let cut = 0; cut < 4 && cut < prefix.length; cut++) {
    const s = storableUtf8(prefix.subarray(0, prefix.length - cut));
    if (s !== null) return { text: s, encoding: 'utf8' };
  }
  return { text: Buffer.from(prefix.buffer, prefix.byteOffset, prefix.byteLength).toString('base64'), encoding: 'base64' };
}

function tooLarge(bytes: Uint8Array, limit: number, what = 'value'): ValueResult {
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const kept = Math.min(bytes.length, OVERSIZED_PREFIX_BYTES);
  return fail(
    PoisonCodes.PAYLOAD_TOO_LARGE,
    `${what} is ${bytes.length} bytes, over the limit of ${limit}; raw_value keeps its first ${kept} bytes only, sha256 of the whole value ${sha256}`,
    prefixOf(bytes),
  );
}

type BinaryResult = { ok: true; json: string } | { ok: true; text: Uint8Array } | { ok: false; result: ValueResult };

/** A binary value's body read with its writer schema: JSON text, or (JSON Schema) the body's own bytes. */
function readBody(
  bytes: Uint8Array,
  route: Extract<ValueRoute, { kind: 'pinned' | 'lookup' }>,
  schemas: ValueSchemas,
  limits: DecodeLimits,
  raw: Raw,
): BinaryResult | { ok: false; unavailable: string } {
  const maxDepth = limits.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH;
  let body = bytes;
  let registry: RegistryKind | 'none';
  let schema: CompiledSchema;
  let named: string;
  if (route.framed) {
    const framing = readFraming(bytes);
    if (framing.kind !== 'framed')
      return { ok: false, result: fail(PoisonCodes.UNSUPPORTED_FRAMING, 'value framing changed while reading it', raw) };
    body = framing.body;
    if (framing.compressed) {
      try {
        body = inflateBody(body, limits.maxPayloadBytes);
      } catch (error) {
        if (error instanceof BodyTooLargeError)
          return {
            ok: false,
            result: fail(PoisonCodes.PAYLOAD_TOO_LARGE, `value inflates to more than the limit of ${limits.maxPayloadBytes} bytes`, raw),
          };
        return { ok: false, result: fail(PoisonCodes.SCHEMA_MISMATCH, 'value is marked zlib-compressed but does not inflate', raw) };
      }
    }
  }
  if (route.kind === 'pinned') {
    schema = schemas.pinned!.schema;
    registry = route.registry;
    named = `the consumer's pinned ${schema.format} schema`;
  } else {
    registry = route.ref.registry;
    named = route.ref.registry === 'confluent' ? `schema id ${route.ref.id}` : `schema version ${route.ref.versionId}`;
    const resolution = schemas.table?.get(refKey(route.ref));
    if (resolution === undefined) {
      return {
        ok: false,
        result: fail(
          PoisonCodes.SCHEMA_NOT_FOUND,
          `value names ${named}, but the consumer declares no schema registry to read it from`,
          raw,
        ),
      };
    }
    if (!resolution.ok) {
      if (resolution.error instanceof RegistryUnavailableError) return { ok: false, unavailable: resolution.error.message };
      if (resolution.error instanceof SchemaNotFoundError)
        return { ok: false, result: fail(PoisonCodes.SCHEMA_NOT_FOUND, `${resolution.error.message} (${route.ref.registry})`, raw) };
      return {
        ok: false,
        result: fail(PoisonCodes.SCHEMA_MISMATCH, `the writer schema (${named}) does not compile: ${resolution.error.message}`, raw),
      };
    }
    schema = resolution.schema;
  }
  try {
    const out = schema.decode(body, registry, maxDepth);
    return 'json' in out ? { ok: true, json: out.json } : { ok: true, text: out.text };
  } catch (error) {
    if (error instanceof ValueTooDeepError)
      return { ok: false, result: fail(PoisonCodes.JSON_TOO_DEEP, `decoded value nests deeper than ${maxDepth} levels`, raw) };
    // Not the library's message: it may quote the bytes.
    return { ok: false, result: fail(PoisonCodes.SCHEMA_MISMATCH, `value does not decode as ${schema.format} with ${named}`, raw) };
  }
}

/** The value's steps, from the ESM's base64 to a normalized envelope. */
function decodeValue(
  record: KafkaRecord,
  consumer: Pick<ConsumerDeclaration, 'dialect' | 'envelopeDefaults'>,
  limits: DecodeLimits,
  schemas: ValueSchemas,
): ValueResult | { ok: false; unavailable: string } {
  const value = record.value;
  if (value === undefined || value === null || value === '') {
    return fail(PoisonCodes.TOMBSTONE, 'record has no value (tombstone)', { text: null, encoding: 'none' });
  }
  const bytes = decodeBase64(value);
  if (bytes === null) {
    // Kept exactly as the event carried it, so that an operator sees what arrived.
    return fail(PoisonCodes.INVALID_BASE64, 'value is not valid base64', { text: replaceUnstorable(value), encoding: 'base64' });
  }
  if (bytes.length > limits.maxPayloadBytes) return tooLarge(bytes, limits.maxPayloadBytes);
  const maxDepth = limits.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH;

  let textBytes: Uint8Array = bytes;
  let converted: string | null = null;
  let binaryRaw: Raw | null = null;
  // The common record (plain JSON, no metadata, no pinned schema) skips the routing.
  const route: ValueRoute =
    bytes[0] === OPEN_BRACE && record.valueSchemaMetadata === undefined && schemas.pinned === undefined
      ? JSON_ROUTE
      : routeOf(bytes, record, schemas);
  if (route.kind === 'poison') return fail(route.code, route.message, { text: value, encoding: 'base64' });
  if (route.kind === 'source-without-registry') {
    const meta = valueSchemaOf(record)!;
    return fail(
      PoisonCodes.UNSUPPORTED_SOURCE_FORMAT,
      `value is ${meta.format} schema ${meta.id ?? '(no id)'} in its binary source encoding, and the consumer declares neither a schema registry nor a pinned schema to read it with`,
      { text: value, encoding: 'base64' },
    );
  }
  if (route.kind === 'pinned' || route.kind === 'lookup') {
    // Binary even where its bytes happen to be valid UTF-8 (Protobuf often is): kept as the event's base64.
    binaryRaw = { text: value, encoding: 'base64' };
    const read = readBody(bytes, route, schemas, limits, binaryRaw);
    if (!read.ok) return 'unavailable' in read ? read : read.result;
    if ('json' in read) {
      converted = read.json;
      if (Buffer.byteLength(converted) > limits.maxPayloadBytes) {
        return fail(
          PoisonCodes.PAYLOAD_TOO_LARGE,
          `value decodes to ${Buffer.byteLength(converted)} bytes of JSON, over the limit of ${limits.maxPayloadBytes}`,
          binaryRaw,
        );
      }
    } else {
      textBytes = read.text;
    }
  }

  let text: string;
  let raw: Raw;
  if (converted !== null) {
    text = converted;
    raw = binaryRaw!;
  } else {
    // Before any other judgement: a value too deep is that, whatever else it holds.
    if (jsonDepth(textBytes, maxDepth + 1) > maxDepth) {
      return fail(PoisonCodes.JSON_TOO_DEEP, `value nests deeper than ${maxDepth} levels`, binaryRaw ?? encodeBytes(bytes, value));
    }
    try {
      text = utf8.decode(textBytes);
    } catch {
      return fail(PoisonCodes.INVALID_UTF8, 'value is not valid UTF-8', { text: value, encoding: 'base64' });
    }
    // Everything below keeps the value as text unless it holds a NUL (text refuses it).
    raw = binaryRaw ?? (text.includes('\u0000') ? { text: value, encoding: 'base64' } : { text, encoding: 'utf8' });
  }
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
    const at = findUnstorable(parsed);
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
  schemas: ValueSchemas = {},
): Decoded {
  const v = decodeValue(record, consumer, limits, schemas);
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
    },
  };
}
