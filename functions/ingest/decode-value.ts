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
import { findUnstorable, jsonDepth } from './json-text';
import { PoisonCodes, type PoisonCode } from './poison-codes';
import type { KafkaRecord } from './types';

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

/** A poison outcome of the value's steps. */
export const fail = (code: PoisonCode, message: string, raw: Raw): ValueResult => ({ ok: false, code, message, raw });

/** The value names a writer schema the registry could not be asked for now: the record is handed back. */
export type Unavailable = { ok: false; unavailable: string };

/** The value's text and the raw a poison row keeps of it. */
type ValueText = { text: string; raw: Raw };

/**
 * What a value reader gives: JSON text already (a binary value read with its writer
 * schema), or bytes still to read as JSON text (a JSON value, or a JSON Schema body), with
 * the raw a binary value keeps (its base64) or null; or the poison or hand-back that stops
 * the value.
 */
export type ValueRead =
  ({ kind: 'json' } & ValueText) | { kind: 'bytes'; bytes: Uint8Array; binaryRaw: Raw | null } | ValueResult | Unavailable;

/**
 * Reads one value's bytes (strict base64 decoded, within the size limit) for the JSON steps
 * below. Synchronous: whatever it needs from afar was resolved for the batch.
 */
export type ValueReader = (record: KafkaRecord, value: string, bytes: Buffer, limits: DecodeLimits) => ValueRead;

/**
 * The seam of the decoding wing (functions/wings/decoding: registry framing, writer schemas,
 * Avro, Protobuf and JSON Schema values, docs/ingest.md "Binary values"), plugged in by the
 * handler: once per batch, before any record is decoded, the reader of its values.
 */
export interface ValueDecoder {
  forBatch(records: readonly KafkaRecord[]): Promise<ValueReader>;
}

/** Without the decoding wing every value is JSON text: its bytes go to the JSON steps as they are. */
export const jsonValues: ValueReader = (_record, _value, bytes) => ({ kind: 'bytes', bytes, binaryRaw: null });

/** The core's own decoder: JSON values only. */
export const JSON_VALUES: ValueDecoder = { forBatch: async () => jsonValues };

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

/**
 * The value's steps, from the ESM's base64 to a normalized envelope: its bytes (tombstone,
 * base64, size), its reading (`read`: a binary value read with its writer schema by the
 * decoding wing), its text (depth, UTF-8) and its envelope (JSON, object, storable,
 * envelope rules).
 */
export function decodeValue(
  record: KafkaRecord,
  consumer: Pick<ConsumerDeclaration, 'dialect' | 'envelopeDefaults'>,
  limits: DecodeLimits,
  read: ValueReader,
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
  const routed = read(record, value, bytes, limits);
  if ('ok' in routed) return routed;
  const text = routed.kind === 'json' ? routed : valueText(routed, value, bytes, limits.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH);
  if ('ok' in text) return text;
  return envelopeOf(consumer, text.text, text.raw);
}

/** Bytes to be read as JSON text: judged for depth first, then strict UTF-8. */
function valueText(
  routed: Extract<ValueRead, { kind: 'bytes' }>,
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
