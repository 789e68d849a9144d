/**
 * The schema registries' wire formats: how a producer's serializer frames a value, and how
 * a Protobuf value names its message type.
 *
 * Confluent   0x00 | schema id (4 bytes, big-endian) | body
 * Glue        0x03 (header version) | compression (0x00 none, 0x05 zlib) | schema version id (16-byte UUID) | body
 *
 * A Protobuf body starts with the message's index in its schema:
 * Confluent   zigzag varints: a count, then that many indexes (a path through nested
 *             messages); the single byte 0x00 stands for [0], the first message.
 *             e.g. 00 → [0], 02 02 → [1], 04 02 00 → [1, 0]
 * Glue        one unsigned varint: the message's position among the schema's top-level
 *             messages, in declaration order (e.g. 01 → the second).
 *
 * With the mapping's SOURCE record format, Lambda removes the framing (the magic byte or
 * header and the id) and names the schema in `valueSchemaMetadata`; a Protobuf body keeps
 * its message index.
 */
import { inflateSync } from 'node:zlib';

export type RegistryKind = 'confluent' | 'glue';

/** Which writer schema a value names. */
export type SchemaRef = { registry: 'confluent'; id: number } | { registry: 'glue'; versionId: string };

export function refKey(ref: SchemaRef): string {
  return ref.registry === 'confluent' ? `confluent:${ref.id}` : `glue:${ref.versionId}`;
}

export type Framing =
  | { kind: 'framed'; ref: SchemaRef; body: Uint8Array; compressed: boolean }
  /** Not framed: plain JSON text, or a binary body that the record's metadata or a pinned schema explains. */
  | { kind: 'none' }
  | { kind: 'unsupported'; message: string };

export const CONFLUENT_MAGIC = 0x00;
export const GLUE_HEADER_VERSION = 0x03;
const GLUE_COMPRESSION_NONE = 0x00;
const GLUE_COMPRESSION_ZLIB = 0x05;
const CONFLUENT_HEADER = 5;
const GLUE_HEADER = 18;

function uuidOf(bytes: Uint8Array): string {
  const hex = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The framing of a value as the producer's serializer wrote it. JSON text starts with a
 * printable character or JSON whitespace; a first byte below 0x20 that is not whitespace
 * is a registry header: 0x00 Confluent, 0x03 Glue, anything else (or a header too short,
 * or an unknown compression) is framing this inbox does not read.
 */
export function readFraming(bytes: Uint8Array): Framing {
  if (bytes.length === 0) return { kind: 'none' };
  const first = bytes[0]!;
  if (first >= 0x20 || first === 0x09 || first === 0x0a || first === 0x0d) return { kind: 'none' };
  if (first === CONFLUENT_MAGIC) {
    if (bytes.length < CONFLUENT_HEADER) {
      return {
        kind: 'unsupported',
        message: `value starts with the Confluent magic byte but is ${bytes.length} bytes, shorter than its header`,
      };
    }
    const id = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).readUInt32BE(1);
    return { kind: 'framed', ref: { registry: 'confluent', id }, body: bytes.subarray(CONFLUENT_HEADER), compressed: false };
  }
  if (first === GLUE_HEADER_VERSION) {
    if (bytes.length < GLUE_HEADER) {
      return {
        kind: 'unsupported',
        message: `value starts with the Glue header version 3 but is ${bytes.length} bytes, shorter than its header`,
      };
    }
    const compression = bytes[1]!;
    if (compression !== GLUE_COMPRESSION_NONE && compression !== GLUE_COMPRESSION_ZLIB) {
      return { kind: 'unsupported', message: `Glue header names compression ${compression}; known: 0 (none), 5 (zlib)` };
    }
    return {
      kind: 'framed',
      ref: { registry: 'glue', versionId: uuidOf(bytes.subarray(2, GLUE_HEADER)) },
      body: bytes.subarray(GLUE_HEADER),
      compressed: compression === GLUE_COMPRESSION_ZLIB,
    };
  }
  return {
    kind: 'unsupported',
    message: `value starts with byte 0x${first.toString(16).padStart(2, '0')}: neither JSON, nor a Confluent (0x00) or Glue (0x03) header`,
  };
}

export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`decompressed value is over the limit of ${limit} bytes`);
    this.name = 'BodyTooLargeError';
  }
}

/**
 * A zlib-compressed Glue body, inflated to at most `maxBytes`: a small value can inflate
 * to gigabytes, so the limit applies while inflating, not after.
 */
export function inflateBody(body: Uint8Array, maxBytes: number): Uint8Array {
  try {
    return inflateSync(body, { maxOutputLength: maxBytes });
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw new BodyTooLargeError(maxBytes);
    throw error;
  }
}

/** A schema id as the mapping reports it: digits for Confluent, a UUID for Glue. */
export function refFromMetadata(schemaId: string | null): SchemaRef | null {
  if (schemaId === null) return null;
  if (/^\d{1,10}$/.test(schemaId) && Number(schemaId) <= 0xffffffff) return { registry: 'confluent', id: Number(schemaId) };
  if (/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/.test(schemaId)) {
    return { registry: 'glue', versionId: schemaId.toLowerCase() };
  }
  return null;
}

export class MessageIndexError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MessageIndexError';
  }
}

/** An unsigned varint at `at`; at most 5 bytes (32 bits). */
function readVarint(bytes: Uint8Array, at: number): { value: number; next: number } {
  let value = 0;
  for (let i = 0; i < 5; i++) {
    if (at + i >= bytes.length) throw new MessageIndexError('message index runs past the end of the value');
    const b = bytes[at + i]!;
    value += (b & 0x7f) * 2 ** (7 * i);
    if ((b & 0x80) === 0) return { value, next: at + i + 1 };
  }
  throw new MessageIndexError('message index varint is longer than 5 bytes');
}

const unzigzag = (n: number) => (n % 2 === 0 ? n / 2 : -(n + 1) / 2);

/** Most message indexes a Confluent value may carry: nesting deeper than this is not a schema anyone writes. */
const MAX_INDEXES = 32;

/** The message-index path at the start of a Protobuf body, and where the message begins. */
export function readMessageIndexes(body: Uint8Array, registry: RegistryKind): { path: number[]; offset: number } {
  if (registry === 'glue') {
    const { value, next } = readVarint(body, 0);
    return { path: [value], offset: next };
  }
  const count = readVarint(body, 0);
  const n = unzigzag(count.value);
  if (n === 0) return { path: [0], offset: count.next };
  if (n < 0 || n > MAX_INDEXES) throw new MessageIndexError(`message index count ${n} is out of range`);
  const path: number[] = [];
  let at = count.next;
  for (let i = 0; i < n; i++) {
    const index = readVarint(body, at);
    const value = unzigzag(index.value);
    if (value < 0) throw new MessageIndexError('message index is negative');
    path.push(value);
    at = index.next;
  }
  return { path, offset: at };
}
