/**
 * A record's value, from the ESM's base64 to a normalized envelope, or the poison reason
 * that stops it (decode.ts lists the steps and why each is strict).
 *
 * Bytes ↔ text, strictly (the helpers below, decode.ts uses them too): Node is lenient by
 * default (Buffer.from(s, 'base64') skips characters that are not base64,
 * Buffer#toString('utf8') replaces invalid bytes with U+FFFD), and either would store
 * something the producer never sent.
 */
import { createHash } from 'node:crypto';
import { normalizeEnvelope, type NormalizedEnvelope } from '../framework/envelopes';
import type { ConsumerDeclaration } from '../framework/types';
import { BodyTooLargeError, inflateBody, readFraming, refKey, type RegistryKind } from './framing';
import { findUnstorable, jsonDepth, ValueTooDeepError } from './json-text';
import { PoisonCodes, type PoisonCode } from './poison-codes';
import { RegistryUnavailableError, SchemaNotFoundError } from './schema-source';
import type { KafkaRecord } from './types';
import { JSON_ROUTE, OPEN_BRACE, routeOf, valueSchemaOf, type ValueRoute, type ValueSchemas } from './value-route';
import type { CompiledSchema } from './writer-schema';

export interface DecodeLimits {
  /** Largest accepted record value in bytes (the whole envelope, before any parsing; and as JSON, once decoded). */
  maxPayloadBytes: number;
  /** Deepest accepted nesting of objects and arrays in a value (DEFAULTS.maxJsonDepth when absent). */
  maxJsonDepth?: number;
}

export const DEFAULT_MAX_JSON_DEPTH = 64;

/** UTF-8 that throws on an invalid byte instead of replacing it. */
const utf8 = new TextDecoder('utf-8', { fatal: true });

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The bytes of strict base64 as the ESM writes it (standard alphabet, padded, canonical),
 * or null. Checked by round trip: Node's decoder skips what it does not understand and
 * accepts the URL-safe alphabet, so only re-encoding to the same text proves the decoding
 * lost nothing. Cheaper than a pattern over the whole value, too.
 */
export function decodeBase64(s: string): Buffer | null {
  const bytes = Buffer.from(s, 'base64');
  return bytes.toString('base64') === s ? bytes : null;
}

/** Bytes as text when they are valid UTF-8 that PostgreSQL can store, else null. */
export function storableUtf8(bytes: Uint8Array): string | null {
  try {
    const s = utf8.decode(bytes);
    return s.includes('\u0000') ? null : s;
  } catch {
    return null;
  }
}

/** Text or base64, whichever keeps the bytes exactly. `base64` is the ESM's own encoding of them. */
export function encodeBytes(bytes: Uint8Array, base64: string): { text: string; encoding: 'utf8' | 'base64' } {
  const s = storableUtf8(bytes);
  return s === null ? { text: base64, encoding: 'base64' } : { text: s, encoding: 'utf8' };
}

/** Text PostgreSQL can store: NUL and unpaired surrogates replaced with U+FFFD. */
export function replaceUnstorable(s: string): string {
  return s.replace(/\u0000/g, '\uFFFD').replace(new RegExp(LONE_SURROGATE.source, 'g'), '\uFFFD');
}

/** What an oversized value's poison row keeps of it: this many bytes from its start. */
export const OVERSIZED_PREFIX_BYTES = 4 * 1024;

// A JSON escape that jsonb refuses: \u0000, or a surrogate (paired ones pass the walk below).
const SUSPECT_ESCAPE = /\\u(?:0000|[dD][89abcdefABCDEF])/;

export type Raw = { text: string | null; encoding: 'utf8' | 'base64' | 'none' };

export type ValueResult =
  { ok: true; envelope: NormalizedEnvelope; text: string } | { ok: false; code: PoisonCode; message: string; raw: Raw };

const fail = (code: PoisonCode, message: string, raw: Raw): ValueResult => ({ ok: false, code, message, raw });

/** The value names a writer schema the registry could not be asked for now: the record is handed back. */
export type Unavailable = { ok: false; unavailable: string };

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
): BinaryResult | Unavailable {
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

/**
 * The value's steps, from the ESM's base64 to a normalized envelope: its bytes (tombstone,
 * base64, size), its route (a binary value read with its writer schema), its text (depth,
 * UTF-8) and its envelope (JSON, object, storable, envelope rules).
 */
export function decodeValue(
  record: KafkaRecord,
  consumer: Pick<ConsumerDeclaration, 'dialect' | 'envelopeDefaults'>,
  limits: DecodeLimits,
  schemas: ValueSchemas,
): ValueResult | Unavailable {
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
  const routed = readRouted(record, value, bytes, limits, schemas);
  if ('ok' in routed) return routed;
  const read = routed.kind === 'json' ? routed : valueText(routed, value, bytes, limits.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH);
  if ('ok' in read) return read;
  return envelopeOf(consumer, read.text, read.raw);
}

/** The value's text and the raw a poison row keeps of it. */
type ValueText = { text: string; raw: Raw };

/**
 * What the value's route gives: JSON text already (a binary value read with its writer
 * schema), or bytes still to read as text (a JSON value, or a JSON Schema body), with the
 * raw a binary value keeps (its base64) or null.
 */
type Routed = ({ kind: 'json' } & ValueText) | { kind: 'bytes'; bytes: Uint8Array; binaryRaw: Raw | null };

function readRouted(
  record: KafkaRecord,
  value: string,
  bytes: Buffer,
  limits: DecodeLimits,
  schemas: ValueSchemas,
): Routed | ValueResult | Unavailable {
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
  if (route.kind === 'json') return { kind: 'bytes', bytes, binaryRaw: null };
  // Binary even where its bytes happen to be valid UTF-8 (Protobuf often is): kept as the event's base64.
  const binaryRaw: Raw = { text: value, encoding: 'base64' };
  const read = readBody(bytes, route, schemas, limits, binaryRaw);
  if (!read.ok) return 'unavailable' in read ? read : read.result;
  if (!('json' in read)) return { kind: 'bytes', bytes: read.text, binaryRaw };
  if (Buffer.byteLength(read.json) > limits.maxPayloadBytes) {
    return fail(
      PoisonCodes.PAYLOAD_TOO_LARGE,
      `value decodes to ${Buffer.byteLength(read.json)} bytes of JSON, over the limit of ${limits.maxPayloadBytes}`,
      binaryRaw,
    );
  }
  return { kind: 'json', text: read.json, raw: binaryRaw };
}

/** Bytes to be read as JSON text: judged for depth first, then strict UTF-8. */
function valueText(
  routed: Extract<Routed, { kind: 'bytes' }>,
  value: string,
  bytes: Uint8Array,
  maxDepth: number,
): ValueText | ValueResult {
  const { bytes: textBytes, binaryRaw } = routed;
  // Before any other judgement: a value too deep is that, whatever else it holds.
  if (jsonDepth(textBytes, maxDepth + 1) > maxDepth) {
    return fail(PoisonCodes.JSON_TOO_DEEP, `value nests deeper than ${maxDepth} levels`, binaryRaw ?? encodeBytes(bytes, value));
  }
  let text: string;
  try {
    text = utf8.decode(textBytes);
  } catch {
    return fail(PoisonCodes.INVALID_UTF8, 'value is not valid UTF-8', { text: value, encoding: 'base64' });
  }
  // Everything below keeps the value as text unless it holds a NUL (text refuses it).
  const raw: Raw = binaryRaw ?? (text.includes('\u0000') ? { text: value, encoding: 'base64' } : { text, encoding: 'utf8' });
  return { text, raw };
}

/** JSON text → the consumer's normalized envelope: an object, storable, and valid by the envelope rules. */
function envelopeOf(consumer: Pick<ConsumerDeclaration, 'dialect' | 'envelopeDefaults'>, text: string, raw: Raw): ValueResult {
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
  if (!result.ok) return fail(result.idTooLong ? PoisonCodes.ID_TOO_LONG : PoisonCodes.ENVELOPE_INVALID, result.message, raw);
  return { ok: true, envelope: result.envelope, text };
}
