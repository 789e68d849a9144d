/**
 * The decoding wing's reader: a value framed for a schema registry, named by the mapping's
 * schema metadata, or read with the consumer's pinned schema becomes JSON text for the
 * core's JSON steps (decode-value.ts in functions/ingest); a plain JSON value passes as it
 * is (docs/ingest.md, "Binary values"). Plugged into the ingest core by its handler, as its
 * ValueDecoder.
 */
import type { ConsumerDeclaration } from '../../framework/types';
import {
  DEFAULT_MAX_JSON_DEPTH,
  fail,
  type DecodeLimits,
  type Raw,
  type Unavailable,
  type ValueDecoder,
  type ValueRead,
  type ValueReader,
  type ValueResult,
} from '../../ingest/decode-value';
import { valueSchemaOf } from '../../ingest/decode';
import { BodyTooLargeError, inflateBody, readFraming, refKey, type RegistryKind } from './framing';
import { ValueTooDeepError } from '../../ingest/json-text';
import { PoisonCodes } from '../../ingest/poison-codes';
import { RegistryUnavailableError, SchemaNotFoundError, type SchemaSource } from './schema-source';
import type { KafkaRecord } from '../../ingest/types';
import { JSON_ROUTE, OPEN_BRACE, resolveValueSchemas, routeOf, type ValueRoute, type ValueSchemas } from './value-route';
import { compileSchema, type CompiledSchema } from './writer-schema';

/**
 * The ingest core's ValueDecoder: the consumer's pinned schema (`valueSchema`), compiled
 * once, when the first batch needs it (its decoder loads then), and the writer schemas each
 * batch's values name, asked of `source` (the consumer's registry) before any record is
 * decoded. A pinned schema that does not compile fails every invocation (the mapping keeps
 * the batch), not a record.
 */
export function binaryValues(consumer: Pick<ConsumerDeclaration, 'valueSchema'>, source?: SchemaSource): ValueDecoder {
  const schema = consumer.valueSchema;
  let compiled: Promise<NonNullable<ValueSchemas['pinned']>> | undefined;
  const pinned =
    schema === undefined
      ? undefined
      : () => (compiled ??= compileSchema(schema).then((s) => ({ schema: s, framing: schema.framing ?? 'none' })));
  return {
    async forBatch(records) {
      const p = await pinned?.();
      return binaryValueReader(await resolveValueSchemas(records, { ...(p ? { pinned: p } : {}), ...(source ? { source } : {}) }));
    },
  };
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

/** The reader of values that may be binary, with the writer schemas resolved for their batch. */
export function binaryValueReader(schemas: ValueSchemas): ValueReader {
  return (record, value, bytes, limits) => readValue(record, value, bytes, limits, schemas);
}

function readValue(record: KafkaRecord, value: string, bytes: Buffer, limits: DecodeLimits, schemas: ValueSchemas): ValueRead {
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
